"""What an operator says of a run besides its work: its business key, set after the
start, and whether it has been seen to (dismissed). The title and the trigger are given
at the start (:func:`workflows.services.start_run`).

Each verb checks its input here and calls one engine transition
(:mod:`workflows.engine.verbs.business_key`, :mod:`workflows.engine.verbs.dismiss`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import UUID

from workflows.engine.verbs import business_key, dismiss
from workflows.errors import InvalidInput
from workflows.models import Run
from workflows.services.targets import run_id_of
from workflows.validation import check_text, max_length

if TYPE_CHECKING:
    from workflows.permissions import AnyUser

__all__ = ["dismiss_run", "set_business_key", "undismiss_run"]


def set_business_key(run: Run | UUID | str, key: str, *, user: AnyUser | None = None) -> Run:
    """Give a run that has not ended the business ``key``; event ``run.business_key_set``.

    Idempotent: the key the run holds already changes nothing and records nothing. An
    empty key, one with a NUL character or one longer than the column is
    :class:`InvalidInput`; an ended run is refused with :class:`InvalidTransition` (its
    key is its history's). For a workflow with ``unique_business_key``, a key another
    live run of it holds is :class:`BusinessKeyInUse`, decided by the database's unique
    index, so of two racing setters exactly one wins.
    """
    check_text(key, field="business key", limit=max_length(Run, "business_key"))
    if not key.strip():
        raise InvalidInput("business key must not be empty or blank", field="business_key")
    run_id = run_id_of(run)
    business_key.set_business_key(run_id, key, user=user)
    return Run.objects.get(pk=run_id)


def dismiss_run(run: Run | UUID | str, *, user: AnyUser | None = None) -> Run:
    """Dismiss an ended run: the console's default lists, its attention views and the
    API's default list leave it out (``dismissed=yes`` or ``all`` shows it); event
    ``run.dismissed``. A run not ended is refused with :class:`InvalidTransition`; a run
    dismissed already is returned unchanged, with nothing recorded. A retry or rerun
    that brings the run back clears its dismissal."""
    run_id = run_id_of(run)
    dismiss.dismiss(run_id, user=user)
    return Run.objects.get(pk=run_id)


def undismiss_run(run: Run | UUID | str, *, user: AnyUser | None = None) -> Run:
    """Take a dismissal back: the run shows in the default lists (and, if it needs
    attention, the attention views) again; event ``run.undismissed``. A run not
    dismissed is returned unchanged, with nothing recorded; a run not ended is refused
    with :class:`InvalidTransition` as :func:`dismiss_run` refuses it."""
    run_id = run_id_of(run)
    dismiss.undismiss(run_id, user=user)
    return Run.objects.get(pk=run_id)
