"""A project whose router sends every app to a database alias other than ``default``.

Two SQLite files: ``default``, which stays empty, and ``primary``, where the router
(:class:`PrimaryRouter`) reads, writes and migrates every app, the workflows app
included. Used by a subprocess in ``tests/backends/test_database_routing.py`` to
prove every statement of the engine, hand-written or ORM, follows the router.
"""

from __future__ import annotations

import os
from pathlib import Path

from flowsite.database import sqlite_database
from tests.settings import *  # noqa: F403

_DIRECTORY = Path(os.environ["ROUTING_TEST_DIR"])
DATABASES = {
    "default": sqlite_database(_DIRECTORY / "default.sqlite3"),
    "primary": sqlite_database(_DIRECTORY / "primary.sqlite3"),
}
DATABASE_ROUTERS = ["tests.routing.settings.PrimaryRouter"]


class PrimaryRouter:
    """Everything reads, writes and migrates on ``primary``."""

    def db_for_read(self, model: type, **hints: object) -> str:
        return "primary"

    def db_for_write(self, model: type, **hints: object) -> str:
        return "primary"

    def allow_migrate(self, db: str, app_label: str, **hints: object) -> bool:
        return db == "primary"
