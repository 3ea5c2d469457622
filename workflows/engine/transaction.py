"""The transaction around every transition: one atomic block, retried when SQLite is busy."""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from django.db import IntegrityError, OperationalError, connections, transaction

from workflows.conf import workflow_settings
from workflows.engine.business_keys import key_refusal
from workflows.engine.sql.connection import engine_alias, statements_on
from workflows.errors import DatabaseBusy

logger = logging.getLogger("workflows.engine")

P = ParamSpec("P")
R = TypeVar("R")


class AfterCommit(Exception):
    """Raised inside a transition to commit what it wrote, then raise ``error``.

    A run whose definition is gone is failed in the transition that found out, and the
    caller still learns why its own operation did not happen.
    """

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def _is_locked(exc: OperationalError) -> bool:
    return "database is locked" in str(exc) or "database table is locked" in str(exc)


def transition(fn: Callable[P, R]) -> Callable[P, R]:
    """Run ``fn`` as one transition: one ``atomic()`` block, all or nothing.

    SQLite may still report "database is locked" when its busy timeout runs out under
    heavy contention; the whole transition is then retried with jittered backoff, a
    bounded number of times, and past the bound :class:`DatabaseBusy` says so (every
    surface shows it as a refusal to retry: a 503, a message, exit status 1). Inside a
    caller's own transaction no retry is possible (the caller's work would be lost), so
    the database's error is left to the caller.

    The unique index of live business keys refusing a write (a start, a retry bringing
    back a run whose key another live run took) is :class:`BusinessKeyInUse`, a refusal
    naming the rule, whichever transition wrote it (:mod:`workflows.engine.business_keys`).
    """

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        attempts = workflow_settings.LOCKED_RETRY_ATTEMPTS
        alias = engine_alias()
        for attempt in range(1, attempts + 1):
            try:
                with transaction.atomic(using=alias), statements_on(alias):
                    try:
                        return fn(*args, **kwargs)
                    except AfterCommit as deferred:
                        error = deferred.error
                raise error
            except IntegrityError as exc:
                refusal = key_refusal(exc)
                if refusal is None:
                    raise
                raise refusal from exc
            except OperationalError as exc:
                in_callers_transaction = connections[alias].in_atomic_block
                if not _is_locked(exc) or in_callers_transaction:
                    raise
                if attempt == attempts:
                    raise DatabaseBusy(
                        f"the database stayed locked by other writers through {attempts} "
                        f"attempts of {fn.__name__}; nothing was written, try again shortly",
                        attempts=attempts,
                    ) from exc
                delay = workflow_settings.LOCKED_RETRY_BASE_DELAY * 2 ** (attempt - 1)
                logger.warning("database is locked in %s; retry %d", fn.__name__, attempt)
                time.sleep(random.uniform(0, delay))
        raise AssertionError("unreachable")  # pragma: no cover

    return run
