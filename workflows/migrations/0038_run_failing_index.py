"""PostgreSQL only: a partial index of failing runs (``workflows.models.runs.FAILING``)
keyed by ``dismissed_at``, from which the count of the runs failed needing attention
(the dashboard's tile, the runs list's filter) is read alone. A run enters it when it
fails; a run running or completing writes nothing to it.

Not on SQLite: there the index offered itself to every list of failed runs not
dismissed, which SQLite then read through it and sorted (a page of ``status=failed``
went from 50 to 300 ms at a million runs); SQLite reads those lists newest first from
``workflows_run_failed_created`` (migration 0035). The condition is written out here so
that this migration keeps its meaning if the code's changes."""

from django.db import migrations, models

FAILING = models.Q(("status", "failed")) | (
    models.Q(("error__isnull", False), ("status", "terminated"))
    & (
        models.Q(("error__code__isnull", True))
        | ~models.Q(("error__code", "terminated"))
        | models.Q(("error__has_key", "cause"))
    )
)
INDEX = models.Index(fields=["dismissed_at"], condition=FAILING, name="workflows_run_failing")


def _create_on_postgresql(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.add_index(apps.get_model("workflows", "Run"), INDEX)


def _drop_on_postgresql(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.remove_index(apps.get_model("workflows", "Run"), INDEX)


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0037_run_tags_ended"),
    ]

    operations = [
        migrations.RunPython(_create_on_postgresql, _drop_on_postgresql),
    ]
