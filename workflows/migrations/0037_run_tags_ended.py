"""PostgreSQL only: a partial GIN index of the tags of runs in a rare final status
(``workflows.queries.tags.ENDED_RARELY``), which the tag and status filters read when
few such runs carry the tags (``queries/tags.tagged``). A run enters it once, when it
ends so; a run running or completing writes nothing to it. SQLite has no GIN index and
reads the tags as before. The statuses are written out here so that this migration
keeps its meaning if the code's list changes."""

from django.db import migrations

CREATE = (
    "CREATE INDEX IF NOT EXISTS workflows_run_tags_ended ON workflows_run "
    "USING gin (tags jsonb_path_ops) WHERE status IN "
    "('cancelled', 'compensated', 'compensation_failed', 'failed', 'terminated')"
)
DROP = "DROP INDEX IF EXISTS workflows_run_tags_ended"


def _create_on_postgresql(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def _drop_on_postgresql(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0036_run_indexes_dismissed"),
    ]

    operations = [
        migrations.RunPython(_create_on_postgresql, _drop_on_postgresql),
    ]
