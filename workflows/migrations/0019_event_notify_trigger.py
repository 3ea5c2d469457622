"""PostgreSQL only: a committed notable event wakes its waiters (``NOTIFY``), with no
statement of the engine's own.

An ``AFTER INSERT ... FOR EACH ROW`` trigger sends, for each event row that is not
routine progress of a unit of work (its ``WHEN`` clause), ``pg_notify('flowsite',
'events')`` and ``pg_notify('flowsite', 'run:<id>')`` of the row's run. Routine progress
is a step, item or compensation becoming ready, starting, completing or having its retry
scheduled (``ROUTINE``): the per-step path, which does not pay for a ``NOTIFY`` (its
commit-time lock serialises every notifying commit of the database; measured in
``docs/benchmarks.md``). ``NOTIFY`` is
transactional: delivered when the transaction commits, identical ones of a transaction
merged. The channel is ``workflows.engine.wakeups.postgresql.CHANNEL``, written out here
so that this migration keeps its meaning if that module changes. SQLite has no such
trigger: ``EventLog.flush`` wakes the process's waiters on commit.
"""

from django.db import migrations

# The event types of routine progress (a POSIX regular expression): they wake nobody.
ROUTINE = r"^(step|item|compensation)\.(ready|started|completed|retry_scheduled)$"

# A row trigger whose WHEN clause leaves routine rows out before any function is
# called: the per-step path pays one regular-expression match per event row.
CREATE = f"""
CREATE FUNCTION workflows_event_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('flowsite', 'events');
    IF NEW.run_id IS NOT NULL THEN
        PERFORM pg_notify('flowsite', 'run:' || NEW.run_id::text);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER workflows_event_notify
    AFTER INSERT ON workflows_event
    FOR EACH ROW WHEN (NEW.type !~ '{ROUTINE}')
    EXECUTE FUNCTION workflows_event_notify();
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
