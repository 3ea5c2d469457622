"""The embedded SQLite database really runs with WAL, a busy timeout and BEGIN IMMEDIATE."""

from __future__ import annotations

import sqlite3

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from flowsite.database import (
    PREPARE_THRESHOLD,
    SQLITE_BUSY_TIMEOUT_SECONDS,
    database_from_url,
    sqlite_database,
)
from workflows.checks import check_sqlite, sqlite_problems

requires_sqlite = pytest.mark.skipif(
    not settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"),
    reason="this leg runs on another database; these tests check SQLite's own settings",
)


def pragma(name: str):
    with connection.cursor() as cursor:
        cursor.execute(f"PRAGMA {name}")
        return cursor.fetchone()[0]


@requires_sqlite
@pytest.mark.django_db
def test_journal_mode_is_wal_and_busy_timeout_is_set():
    assert pragma("journal_mode") == "wal"
    assert pragma("busy_timeout") == SQLITE_BUSY_TIMEOUT_SECONDS * 1000
    assert pragma("synchronous") == 1  # NORMAL


@requires_sqlite
@pytest.mark.django_db(transaction=True)
def test_writes_start_with_begin_immediate():
    with CaptureQueriesContext(connection) as captured, transaction.atomic():
        pragma("user_version")
    assert captured.captured_queries[0]["sql"] == "BEGIN IMMEDIATE"


@requires_sqlite
@pytest.mark.django_db(transaction=True)
def test_an_open_transition_holds_the_write_lock_from_its_first_statement():
    """Another writer cannot even begin while a transition is open, before it writes."""
    other = sqlite3.connect(connection.settings_dict["NAME"], timeout=0)
    try:
        with transaction.atomic():
            pragma("user_version")  # a read only: DEFERRED mode would hold no lock yet
            with pytest.raises(sqlite3.OperationalError, match="database is locked"):
                other.execute("BEGIN IMMEDIATE")
        other.execute("BEGIN IMMEDIATE")  # released at commit
        other.rollback()
    finally:
        other.close()


def test_sqlite_settings_pass_the_system_check():
    assert check_sqlite() == []


def test_system_check_warns_about_unsafe_sqlite_settings(tmp_path):
    bare = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(tmp_path / "x.db")}
    ids = sorted(message.id for message in sqlite_problems("bare", bare))
    assert ids == ["workflows.W001", "workflows.W002", "workflows.W003"]
    assert sqlite_problems("tuned", sqlite_database(tmp_path / "y.db")) == []


def test_database_url_parsing(tmp_path):
    postgres = database_from_url("postgres://app:s%40cret@db.example:6543/flows?sslmode=require")
    assert postgres["ENGINE"] == "django.db.backends.postgresql"
    assert (postgres["USER"], postgres["PASSWORD"]) == ("app", "s@cret")
    assert (postgres["HOST"], postgres["PORT"], postgres["NAME"]) == ("db.example", "6543", "flows")
    assert postgres["OPTIONS"] == {"sslmode": "require", "prepare_threshold": PREPARE_THRESHOLD}
    sqlite = database_from_url(f"sqlite:///{tmp_path}/a.db")
    assert sqlite == sqlite_database(tmp_path / "a.db")
    with pytest.raises(ValueError, match="scheme 'mysql' is not supported"):
        database_from_url("mysql://localhost/x")
    with pytest.raises(ValueError, match="must name a database"):
        database_from_url("postgres://localhost")


@pytest.mark.parametrize(
    ("query", "threshold"),
    [
        ("", 5),
        ("?prepare_threshold=0", 0),
        ("?prepare_threshold=none", None),
        ("?prepare_threshold=", None),
    ],
)
def test_a_postgresql_url_prepares_statements_unless_it_says_none(query, threshold):
    assert database_from_url(f"postgres://db/flows{query}")["OPTIONS"] == {
        "prepare_threshold": threshold
    }


@pytest.mark.parametrize("value", ["often", "-1", "2.5"])
def test_a_prepare_threshold_that_is_no_count_is_refused_by_name(value):
    with pytest.raises(ValueError, match=f"prepare_threshold='{value}' is neither a whole number"):
        database_from_url(f"postgres://db/flows?prepare_threshold={value}")
