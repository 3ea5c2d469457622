"""Drop the single-column ``run_id`` indexes of events and steps.

Each is covered by an index that leads with ``run_id`` (events: ``workflows_event_run``
on (run, id); steps: the unique (run, name) and ``workflows_step_run_status``), and
every event or step written had to update it too. Dropped by name rather than through
``AlterField``: on SQLite that would copy both tables, the two largest, to drop an index.
"""

import django.db.models.deletion
from django.db import migrations, models

# Django's names for the foreign keys' own indexes (the same on SQLite and PostgreSQL).
COVERED = {
    "workflows_event": "workflows_event_run_id_f27435b1",
    "workflows_step": "workflows_step_run_id_1543a7bc",
}


def _foreign_key(related_name: str) -> models.ForeignKey:
    return models.ForeignKey(
        db_index=False,
        on_delete=django.db.models.deletion.CASCADE,
        related_name=related_name,
        to="workflows.run",
    )


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0010_run_children"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(model_name="event", name="run", field=_foreign_key("events")),
                migrations.AlterField(model_name="step", name="run", field=_foreign_key("steps")),
            ],
            database_operations=[
                migrations.RunSQL(
                    sql=f'DROP INDEX IF EXISTS "{index}"',
                    reverse_sql=f'CREATE INDEX IF NOT EXISTS "{index}" ON "{table}" ("run_id")',
                )
                for table, index in COVERED.items()
            ],
        ),
    ]
