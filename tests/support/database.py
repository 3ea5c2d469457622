"""What the test database is, for the tests whose outcome depends on it."""

from __future__ import annotations

from django.db import connection


def is_sqlite() -> bool:
    return connection.vendor == "sqlite"
