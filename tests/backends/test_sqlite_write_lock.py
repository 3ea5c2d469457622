"""The SQLite backend's writers queue on a file lock: held from BEGIN to COMMIT or
ROLLBACK, for one statement when writing outside a transaction, never for reads."""

from __future__ import annotations

import threading

import pytest
from django.conf import settings
from django.db import OperationalError, connection, connections, transaction

from workflows.backends.sqlite3.writelock import WriteLock
from workflows.models import Event

pytestmark = [
    pytest.mark.skipif(
        settings.DATABASES["default"]["ENGINE"] != "workflows.backends.sqlite3",
        reason="the write lock belongs to the SQLite backend",
    ),
    pytest.mark.django_db(transaction=True),
]


def lock_path() -> str:
    return f"{connection.settings_dict['NAME']}-writer.lock"


def another_writer_gets_in() -> bool:
    """Whether another connection (another open file) could take the lock right now."""
    other = WriteLock(lock_path(), timeout=0.0)
    try:
        other.acquire()
    except OperationalError:
        return False
    except Exception as exc:  # sqlite3's own error, raised by the lock itself
        return "database is locked" not in str(exc)
    finally:
        other.close()
    return True


def test_a_transaction_holds_the_lock_until_commit():
    with transaction.atomic():
        assert not another_writer_gets_in()
    assert another_writer_gets_in()


def test_a_rolled_back_transaction_releases_the_lock():
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        assert not another_writer_gets_in()
        1 / 0  # noqa: B018
    assert another_writer_gets_in()


def test_reads_outside_a_transaction_take_no_lock():
    other = WriteLock(lock_path(), timeout=1.0)
    other.acquire()
    try:
        assert Event.objects.count() >= 0  # not blocked by the other holder
    finally:
        other.close()


def test_a_write_outside_a_transaction_waits_for_the_holder_then_proceeds():
    other = WriteLock(lock_path(), timeout=1.0)
    other.acquire()
    released = threading.Timer(0.2, other.release)
    released.start()
    try:
        with connection.cursor() as cursor:
            cursor.execute("UPDATE workflows_event SET published = published WHERE id = -1")
        # Should it not wait, say why: an open transaction, or a lock the connection
        # believes it holds.
        assert not other.held, (
            connection.connection.in_transaction,
            connection.write_lock is not None and connection.write_lock.held,
        )
    finally:
        released.join()
        other.close()
    assert another_writer_gets_in()


def test_a_writer_gives_up_after_the_busy_timeout():
    other = WriteLock(lock_path(), timeout=1.0)
    other.acquire()
    # The lock is the open connection's: open it first, or the patched timeout would be
    # that of a closed connection's lock and the next one would wait its own 20 s.
    connection.ensure_connection()
    patient = connection.write_lock.timeout
    connection.write_lock.timeout = 0.05
    try:
        with pytest.raises(OperationalError, match="database is locked"), transaction.atomic():
            pass
        assert not connection.in_atomic_block
    finally:
        connection.write_lock.timeout = patient
        other.close()


def test_two_threads_writing_take_turns():
    """Each thread's connection opens its own lock file, so they exclude each other."""
    inside = threading.Event()
    leave = threading.Event()
    errors: list[BaseException] = []

    def hold() -> None:
        try:
            with transaction.atomic():
                inside.set()
                leave.wait(5)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    assert inside.wait(5)
    assert not another_writer_gets_in()
    leave.set()
    holder.join(5)
    assert not holder.is_alive() and not errors
    with transaction.atomic():
        Event.objects.filter(id=-1).update(published=True)
