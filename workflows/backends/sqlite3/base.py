"""Django's SQLite backend whose writers queue on a file lock (``writelock.WriteLock``).

Use it as ``ENGINE = "workflows.backends.sqlite3"`` with the same ``NAME`` and
``OPTIONS`` as Django's (the demo project does, ``flowsite/database.py``). Every
transaction takes the lock before its ``BEGIN`` and releases it after ``COMMIT`` or
``ROLLBACK``; a write outside a transaction (django-q2's broker claims and
acknowledges its messages that way) takes it for that one statement. Reads never take
it: in WAL mode they do not wait for writers. SQLite's own locking is untouched, so
processes that use Django's backend on the same file stay correct, only slower to get
in. An in-memory database has no file to lock beside it and behaves as Django's.

The lock is taken in overrides of Django's private transaction hooks (:data:`HOOKS`).
Were a Django release to rename one, its override would silently never run and writers
would stop queueing on the lock: :func:`missing_hooks` names what Django's wrapper
lacks, and system check ``workflows.E012`` refuses to start on such a Django.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.sqlite3 import base

from workflows.backends.sqlite3.writelock import WriteLock

_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")

# The private methods of Django's SQLite wrapper that DatabaseWrapper overrides.
HOOKS = ("_start_transaction_under_autocommit", "_commit", "_rollback", "_close")


def missing_hooks(django_wrapper: type = base.DatabaseWrapper) -> tuple[str, ...]:
    """Which of :data:`HOOKS` ``django_wrapper`` (Django's SQLite wrapper) has no method for.

    Django calls its own hooks by name, so an override whose name Django no longer has
    is never called: the transaction it should lock begins and ends unlocked.
    """
    return tuple(name for name in HOOKS if not callable(getattr(django_wrapper, name, None)))


class SQLiteCursorWrapper(base.SQLiteCursorWrapper):
    """Django's cursor; a write outside a transaction holds the write lock meanwhile."""

    write_lock: WriteLock | None = None

    def execute(self, query: str, params: Any = None) -> Any:
        lock = self._lock_for(query)
        if lock is not None:
            with lock:
                return super().execute(query, params)
        return super().execute(query, params)

    def executemany(self, query: str, param_list: Any) -> Any:
        lock = self._lock_for(query)
        if lock is not None:
            with lock:
                return super().executemany(query, param_list)
        return super().executemany(query, param_list)

    def _lock_for(self, query: str) -> WriteLock | None:
        """The write lock when ``query`` writes outside a transaction, else ``None``."""
        if (
            self.write_lock is not None
            and not self.connection.in_transaction
            and query.lstrip()[:7].upper().startswith(_WRITES)
        ):
            return self.write_lock
        return None


class DatabaseWrapper(base.DatabaseWrapper):
    """SQLite connections that take the database's write lock around their writes."""

    write_lock: WriteLock | None = None

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        connection = super().get_new_connection(conn_params)
        if not self.is_in_memory_db():
            self.write_lock = WriteLock(
                f"{self.settings_dict['NAME']}-writer.lock", float(conn_params.get("timeout", 5))
            )
        return connection

    def create_cursor(self, name: str | None = None) -> Any:
        cursor = self.connection.cursor(factory=SQLiteCursorWrapper)
        cursor.write_lock = self.write_lock
        return cursor

    def _start_transaction_under_autocommit(self) -> None:
        begin = super()._start_transaction_under_autocommit  # type: ignore[misc]  # not in stubs
        if self.write_lock is None:
            return begin()
        with self.wrap_database_errors:  # "database is locked" as Django's OperationalError
            self.write_lock.acquire()
        try:
            begin()
        except BaseException:
            self.write_lock.release()
            raise

    def _commit(self) -> None:
        try:
            super()._commit()  # type: ignore[misc]  # not in stubs
        finally:
            self._release_unless_open()

    def _rollback(self) -> None:
        try:
            super()._rollback()  # type: ignore[misc]  # not in stubs
        finally:
            self._release_unless_open()

    def _close(self) -> None:
        try:
            super()._close()  # type: ignore[misc]  # not in stubs
        finally:
            if self.write_lock is not None:
                self.write_lock.close()

    def _release_unless_open(self) -> None:
        # A COMMIT that failed (SQLITE_BUSY) leaves the transaction open: keep the lock.
        if self.write_lock is not None and not (
            self.connection is not None and self.connection.in_transaction
        ):
            self.write_lock.release()
