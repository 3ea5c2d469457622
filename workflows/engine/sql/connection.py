"""Which database the engine's statements go to: the transition's, or the router's choice."""

from __future__ import annotations

from contextvars import ContextVar

from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper

from workflows.models import Run

# The connection of the transition running in this thread (context), if any.
_TRANSITION_DB: ContextVar[BaseDatabaseWrapper | None] = ContextVar(
    "workflows_transition_db", default=None
)


def engine_alias() -> str:
    """The database alias of the workflows tables, resolved the Django way.

    The router's ``db_for_write`` for the engine's models: hand-written statements,
    ORM calls and the transaction around them all use it, so a project that routes the
    workflows app to its own database gets every statement there. Resolved once per
    transition (:func:`statements_on`), whose statements must all run in its
    transaction, and for every statement outside one: a router may choose by request
    or tenant.
    """
    current = _TRANSITION_DB.get()
    return current.alias if current is not None else router.db_for_write(Run)


class statements_on:  # lower case: a context manager called like a function
    """Send the engine's statements to ``alias`` meanwhile: the transaction of a transition.

    A class rather than a generator-based context manager: every transition enters one,
    and a generator's frame and wrapper cost several calls more.
    """

    __slots__ = ("_alias", "_token")

    def __init__(self, alias: str) -> None:
        self._alias = alias

    def __enter__(self) -> None:
        self._token = _TRANSITION_DB.set(connections[self._alias])

    def __exit__(self, *exc_info: object) -> None:
        _TRANSITION_DB.reset(self._token)


def engine_connection() -> BaseDatabaseWrapper:
    """The connection of the workflows tables: the transition's, or the router's choice.

    Every hand-written statement runs on it, so it runs in the transition's transaction.
    """
    current = _TRANSITION_DB.get()
    return current if current is not None else connections[router.db_for_write(Run)]
