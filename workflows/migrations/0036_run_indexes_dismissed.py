"""PostgreSQL only: the status index and the deadline index carry ``dismissed_at``
(``INCLUDE``), so the runs list's bounded count of a status or of passed deadlines, which
leaves dismissed runs out, reads the index alone. Both are rebuilt (about 4 s at a
million runs, writes to the runs table wait meanwhile).

Not on SQLite, which has no ``INCLUDE``; the models declare both indexes without it, so
that Django's checks do not warn of it there, and this migration changes no model
state."""

from django.db import migrations, models

STATUS = {"fields": ["status", "created_at"], "name": "workflows_run_status"}
DEADLINE = {
    "fields": ["deadline"],
    "condition": models.Q(deadline__isnull=False),
    "name": "workflows_run_deadline",
}


def _rebuild(include: list[str]):
    def rebuild(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        run = apps.get_model("workflows", "Run")
        for spec in (STATUS, DEADLINE):
            schema_editor.remove_index(run, models.Index(**spec))
            schema_editor.add_index(run, models.Index(**spec, include=include))

    return rebuild


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0035_sqlite_page_indexes"),
    ]

    operations = [
        migrations.RunPython(_rebuild(["dismissed_at"]), _rebuild([])),
    ]
