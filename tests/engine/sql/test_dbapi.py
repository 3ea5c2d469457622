"""The engine's direct statement path (``engine/sql/execute.py``) behaves as Django's
cursor does.

Statements of a transition go straight to the DB-API connection; these tests pin what
that must not change: stored values, Django's exceptions, a broken transaction's
refusal, and that anything watching statements still sees every one of them. And on a
Django whose connection lacks what the path reads, statements take Django's cursor
(system check ``workflows.W009`` says so).
"""

from __future__ import annotations

import importlib.util
import sys
import types
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import django
import pytest
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connection, connections, models, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model
from django.db.transaction import TransactionManagementError
from django.test.utils import CaptureQueriesContext

import workflows
from workflows import Task, Workflow
from workflows.checks import check_direct_path, direct_path_problems
from workflows.engine.sql import execute as execute_module
from workflows.engine.sql.adapters import adapter, stored_run_id
from workflows.engine.sql.execute import (
    DIRECT_PATH_ATTRIBUTES,
    direct_path_missing,
    execute,
    fetch_one,
    to_qmark,
)
from workflows.engine.sql.identifiers import column, table
from workflows.engine.sql.inserts import insert_rows
from workflows.engine.sql.locks import lock_run
from workflows.engine.transaction import transition
from workflows.models import Event, FanOutItem, Run, Step
from workflows.status import RunStatus, StepStatus
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

NOOP = "tests.engine.sql.test_dbapi.noop"


def noop(ctx):
    return {"done": True}


class TwoSteps(Workflow):
    name = "dbapi_two_steps"
    first = Task(NOOP)
    second = Task(NOOP)


RUN_KEY = uuid.uuid4()
# Values of each kind of field the engine writes, plain and not so plain.
SAMPLES: list[tuple[type[models.Field], list[Any]]] = [
    (models.BooleanField, [True, False, None]),
    (models.IntegerField, [None, 0, 7, 2**40, True]),
    (models.CharField, [None, "", "host:1:2", StepStatus.COMPLETED, RunStatus.WAITING]),
    (models.TextField, ["", "a long text"]),
    (models.JSONField, [None, {"a": [1, 2.5, None]}, {"x": "é"}, [], "text", 0, False]),
    (models.UUIDField, [None, RUN_KEY, str(RUN_KEY)]),
    (models.DateTimeField, [None, datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)]),
]


def samples(field: models.Field) -> list[Any]:
    target = field.target_field if isinstance(field, models.ForeignKey) else field
    if isinstance(target, models.AutoField | models.BigAutoField):
        return [None, 5]
    for field_type, values in SAMPLES:
        if isinstance(target, field_type):
            return values
    return []


def _stored(value: Any) -> Any:
    """A comparable form of a stored value (psycopg wraps JSON in ``Jsonb``)."""
    return (type(value).__name__, value.obj) if hasattr(value, "obj") else value


@pytest.mark.parametrize("model", [Run, Step, Event, FanOutItem])
def test_adapters_store_what_django_stores(model: type[Model]):
    checked = 0
    for field in model._meta.concrete_fields:
        for value in samples(field):
            adapt = adapter(field, connection)
            expected = field.get_db_prep_save(value, connection)
            assert _stored(adapt(value, connection)) == _stored(expected), (field.name, value)
            checked += 1
    assert checked >= 20


def test_placeholders_become_question_marks_and_literal_percents_stay():
    sql = "SELECT STRFTIME('%%Y', 'now') WHERE a = %s AND b = %s"
    assert to_qmark(sql) == "SELECT STRFTIME('%Y', 'now') WHERE a = ? AND b = ?"


def test_a_database_error_on_the_direct_path_is_djangos():
    # The error leaves the atomic block, which rolls back: PostgreSQL's transaction is
    # aborted after an error.
    with pytest.raises(DatabaseError), transaction.atomic():
        execute(connection, "SELECT no_such_column FROM workflows_run", [])


def test_a_transaction_marked_for_rollback_refuses_statements():
    with transaction.atomic():
        transaction.set_rollback(True)
        with pytest.raises(TransactionManagementError):
            fetch_one(connection, "SELECT 1", [])


def test_an_execute_wrapper_sees_every_statement_of_a_step():
    workflows.start_run(TwoSteps)
    seen: list[str] = []

    def record(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        run_pending()
    # On PostgreSQL an UPDATE may be a data-modifying CTE's (WITH … UPDATE …).
    updates = [sql for sql in seen if "UPDATE " in sql and not sql.startswith("SELECT")]
    # Per step at least its claim and its fenced completion, plus the run's own end.
    assert len(updates) >= 5
    assert Run.objects.get().status == RunStatus.COMPLETED


def test_the_locked_run_loads_a_column_it_did_not_read_instead_of_defaulting_it():
    started = workflows.start_run(TwoSteps, business_key="order-17")

    @transition
    def read() -> tuple[str, str]:
        run = lock_run(started.pk)
        return run.status, run.business_key

    assert read() == (RunStatus.RUNNING, "order-17")


def test_inserted_steps_get_the_defaults_bulk_create_would_give():
    run = workflows.start_run(TwoSteps)
    inserted = Step.objects.get(run=run, name="second")  # not entered yet: as inserted
    reference = Step(run=run, name="reference", kind="task", max_attempts=inserted.max_attempts)
    reference.save()
    for field in Step._meta.concrete_fields:
        if field.name in {"id", "name", "created_at", "updated_at"}:
            continue
        assert getattr(inserted, field.attname) == getattr(reference, field.attname), field.name
    assert inserted.created_at is not None and inserted.updated_at is not None


def test_inserting_rows_needs_an_automatic_primary_key():
    with transaction.atomic(), pytest.raises(TypeError, match="automatic primary key"):
        insert_rows(Run, [{"workflow_name": "x"}])


@contextmanager
def djangos_cursors_counted(opened: list[bool]) -> Iterator[None]:
    """Count the cursors Django's connection hands out meanwhile, then restore it exactly.

    The count is an instance attribute shadowing the class's method; deleting it
    afterwards leaves the connection as it was (``monkeypatch`` would leave a bound
    method behind, or delete a class attribute it read through the proxy).
    """
    wrapper = connections[DEFAULT_DB_ALIAS]
    django_cursor = wrapper.cursor

    def counting_cursor(*args: Any, **kwargs: Any) -> Any:
        opened.append(True)
        return django_cursor(*args, **kwargs)

    wrapper.cursor = counting_cursor  # type: ignore[method-assign]
    try:
        yield
    finally:
        del wrapper.cursor
    assert "cursor" not in vars(wrapper)


def test_statements_bypass_djangos_cursor_unless_queries_are_logged():
    opened: list[bool] = []
    with transaction.atomic(), djangos_cursors_counted(opened):  # after the savepoint
        assert fetch_one(connection, "SELECT %s", [1]) == (1,)
        assert opened == []
        with CaptureQueriesContext(connection) as captured:
            assert fetch_one(connection, "SELECT %s", [2]) == (2,)
        assert opened == [True]
        assert [query["sql"] for query in captured.captured_queries] == ["SELECT 2"]


def test_the_installed_djangos_connection_has_all_the_direct_path_reads():
    """The guard below is silent on every Django the suite runs on (the CI matrix)."""
    assert direct_path_missing(connections[DEFAULT_DB_ALIAS]) == ()
    assert direct_path_missing(connection) == ()  # django.db.connection, a proxy
    assert check_direct_path() == []


class ConnectionWithout:
    """The test database's connection as a Django without one of the attributes the
    direct path reads (``lacks``) would wrap it.

    Every other attribute is the real connection's (``__getattr__`` forwards), so its
    statements run in the test's transaction; ``cursor()`` counts Django's cursors.
    """

    lacks = ""

    def __init__(self, real: BaseDatabaseWrapper) -> None:
        self.real = real
        self.cursors = 0

    def __getattr__(self, name: str) -> Any:
        if name == self.lacks:
            raise AttributeError(name)
        return getattr(self.real, name)

    def cursor(self) -> Any:
        self.cursors += 1
        return self.real.cursor()


@pytest.fixture
def fresh_memo(monkeypatch):
    """``direct_path_missing`` remembers its answer per class: an empty memo meanwhile,
    so the stand-in classes leave no entry behind (monkeypatch puts the real one back)."""
    monkeypatch.setattr(execute_module, "_MISSING", {})


def rename_a_run(stand_in: Any) -> int:
    """Set the only run's business key through the engine's ``execute`` on ``stand_in``."""
    run = Run.objects.get()
    sql = f"UPDATE {table(Run)} SET {column(Run, 'business_key')} = %s WHERE id = %s"
    return execute(stand_in, sql, ["renamed", stored_run_id(run.pk, stand_in.real)])


def test_a_stand_in_lacking_nothing_takes_the_direct_path(fresh_memo):
    """The control for the test below: the stand-in itself qualifies for the direct path."""
    workflows.start_run(TwoSteps)
    stand_in = ConnectionWithout(connections[DEFAULT_DB_ALIAS])
    assert direct_path_missing(stand_in) == ()
    with transaction.atomic():
        assert execute_module._direct(stand_in)
        assert rename_a_run(stand_in) == 1
        assert fetch_one(stand_in, "SELECT %s, '100%%'", [7]) == (7, "100%")
    assert stand_in.cursors == 0
    assert Run.objects.get().business_key == "renamed"


@pytest.mark.parametrize("name", DIRECT_PATH_ATTRIBUTES)
def test_a_django_lacking_what_the_direct_path_reads_runs_statements_on_its_cursor(
    name, fresh_memo
):
    workflows.start_run(TwoSteps)
    stand_in_class = type(f"ConnectionWithout_{name}", (ConnectionWithout,), {"lacks": name})
    stand_in = stand_in_class(connections[DEFAULT_DB_ALIAS])
    assert direct_path_missing(stand_in) == (name,)
    (warning,) = direct_path_problems("default", stand_in)
    assert warning.id == "workflows.W009"
    assert name in warning.msg and f"Django {django.get_version()}" in warning.msg
    assert "5.2 or 6.1" in warning.hint and "Django's cursor" in warning.hint
    with transaction.atomic():
        assert not execute_module._direct(stand_in)
        assert rename_a_run(stand_in) == 1
        assert fetch_one(stand_in, "SELECT %s, '100%%'", [7]) == (7, "100%")
    assert stand_in.cursors == 2
    assert Run.objects.get().business_key == "renamed"


def test_without_djangos_placeholder_pattern_sqlite_statements_take_djangos_cursor(monkeypatch):
    """A Django without ``FORMAT_QMARK_REGEX``: a copy of ``execute.py`` imported where
    Django's SQLite module lacks it still imports, and on SQLite hands every statement
    to Django's cursor, which rewrites the placeholders its own way."""
    source = execute_module.__file__
    assert source is not None
    spec = importlib.util.spec_from_file_location("execute_without_qmark", source)
    assert spec is not None and spec.loader is not None
    copy = importlib.util.module_from_spec(spec)
    with monkeypatch.context() as patch:
        djangos = "django.db.backends.sqlite3.base"
        patch.setitem(sys.modules, djangos, types.ModuleType(djangos))
        spec.loader.exec_module(copy)
    assert copy.FORMAT_QMARK_REGEX is None
    sqlite = connection.vendor == "sqlite"
    real = connections[DEFAULT_DB_ALIAS]
    assert copy.direct_path_missing(real) == (("FORMAT_QMARK_REGEX",) if sqlite else ())
    opened: list[bool] = []
    with transaction.atomic(), djangos_cursors_counted(opened):
        assert copy.fetch_one(real, "SELECT %s, '100%%'", [7]) == (7, "100%")
    assert opened == ([True] if sqlite else [])


def _prepared_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


@contextmanager
def prepare_threshold(value: int | None) -> Iterator[None]:
    """The DB-API connection's ``prepare_threshold`` as Django's ``OPTIONS`` would set it."""
    raw = connection.connection
    before = raw.prepare_threshold
    raw.prepare_threshold = value
    try:
        yield
    finally:
        raw.prepare_threshold = before


def _times_prepared(marker: str) -> int:
    return len([text for text in _prepared_statements() if marker in text])


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_a_statement_run_often_is_prepared_once_only_when_the_project_allows_it():
    sql = "SELECT CAST(%s AS integer) + 1 AS prepared_once"
    connection.ensure_connection()
    with transaction.atomic(), prepare_threshold(None):
        assert [fetch_one(connection, sql, [n]) for n in range(8)] == [(n + 1,) for n in range(8)]
        assert _times_prepared("prepared_once") == 0
    with transaction.atomic(), prepare_threshold(2):
        assert fetch_one(connection, sql, [1]) == (2,)
        assert _times_prepared("prepared_once") == 0  # run once: not yet worth preparing
        assert [fetch_one(connection, sql, [n]) for n in range(8)] == [(n + 1,) for n in range(8)]
        assert _times_prepared("prepared_once") == 1


@pytest.mark.skipif("connection.vendor != 'postgresql'")
@pytest.mark.django_db(transaction=True)
def test_a_read_outside_a_transaction_is_prepared_too_unless_queries_are_watched():
    """A worker's look before it claims runs outside a transaction."""
    sql = "SELECT CAST(%s AS integer) * 2 AS outside_prepared"
    connection.ensure_connection()
    with prepare_threshold(2):
        with CaptureQueriesContext(connection) as captured:
            assert fetch_one(connection, sql, [4]) == (8,)
        assert len(captured.captured_queries) == 1  # watched: Django's cursor saw it
        assert [fetch_one(connection, sql, [n]) for n in range(6)] == [(2 * n,) for n in range(6)]
        assert _times_prepared("outside_prepared") == 1
        connection.close()  # prepared statements end with their connection


def test_a_prepared_statement_gives_what_the_same_statement_gives():
    """On SQLite, and on PostgreSQL without ``prepare_threshold``, statements are bound
    as Django binds them; with it, server-side, prepared after a few runs, and they read
    the same values either way."""
    sql = "SELECT CAST(%s AS integer) + 1, %s, '100%%'"
    expected = (2, "a", "100%")
    connection.ensure_connection()
    with transaction.atomic():
        assert fetch_one(connection, sql, [1, "a"]) == expected
    if connection.vendor == "postgresql":
        with transaction.atomic(), prepare_threshold(1):
            assert [fetch_one(connection, sql, [1, "a"]) for _ in range(3)] == [expected] * 3
