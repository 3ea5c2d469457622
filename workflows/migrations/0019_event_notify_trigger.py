"""PostgreSQL only: a committed event wakes its waiters (``NOTIFY``), with no statement
of the engine's own.

An ``AFTER INSERT ... FOR EACH STATEMENT`` trigger reads the rows the statement inserted
(a transition table) and sends ``pg_notify('flowsite', 'events')`` and one
``pg_notify('flowsite', 'run:<id>')`` per run among them. ``NOTIFY`` is transactional: the
notifications are delivered when the transaction commits, and identical ones of one
transaction are merged. The channel is ``workflows.engine.wakeups.postgresql.CHANNEL``,
written out here so that this migration keeps its meaning if that module changes.
SQLite has no such trigger: ``EventLog.flush`` wakes the process's waiters on commit.
"""

from django.db import migrations

CREATE = """
CREATE FUNCTION workflows_event_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('flowsite', 'events');
    PERFORM pg_notify('flowsite', 'run:' || run_id::text)
        FROM (SELECT DISTINCT run_id FROM inserted WHERE run_id IS NOT NULL) AS runs;
    RETURN NULL;
END
$$;
CREATE TRIGGER workflows_event_notify
    AFTER INSERT ON workflows_event
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION workflows_event_notify();
"""

DROP = """
DROP TRIGGER IF EXISTS workflows_event_notify ON workflows_event;
DROP FUNCTION IF EXISTS workflows_event_notify();
"""


def _create_on_postgresql(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def _drop_on_postgresql(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0018_live_runs"),
    ]

    operations = [
        migrations.RunPython(_create_on_postgresql, _drop_on_postgresql),
    ]
