"""Dismissing an ended run: an operator verb that says "seen to".

A failed run stays in the console's attention views until someone acts; often the act is
to decide that nothing needs doing (the order was refunded by hand, the input was a
test). ``dismiss`` records that decision on the run (``dismissed_at``, ``dismissed_by``)
so the default lists, the dashboard's attention counts and the API's default list leave
it out; a filter (``dismissed=yes`` or ``all``) shows it, and ``undismiss`` takes the
decision back. Nothing of the run's work changes.

Only an ended run is dismissed (:data:`~workflows.engine.guards.DISMISS`). A run brought
back by a retry or rerun is live again, so its dismissal is cleared in the same
transition (:func:`workflows.engine.runs.set_run_status`): a dismissed run is always an
ended one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import UUID

from django.contrib.auth import get_user_model

from workflows.engine.events import actor
from workflows.engine.guards import DISMISS, UNDISMISS
from workflows.engine.scope import run_scope
from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.updates import cas_update
from workflows.engine.transaction import transition
from workflows.errors import StaleState
from workflows.models import Run

if TYPE_CHECKING:
    from workflows.permissions import AnyUser

__all__ = ["dismiss", "undismiss"]


@transition
def dismiss(run_id: UUID, *, user: AnyUser | None = None) -> bool:
    """Dismiss the ended run; event ``run.dismissed``. Whether this call dismissed it:
    a run dismissed already is left as it is, with nothing recorded.

    Under the run's lock; the compare-and-set restates the status and version read, so
    a retry that brought the run back meanwhile wins and this call raises
    :class:`StaleState` (or, after the retry committed, :class:`InvalidTransition`).
    """
    return _set(run_id, dismissed=True, user=user)


@transition
def undismiss(run_id: UUID, *, user: AnyUser | None = None) -> bool:
    """Take a dismissal back; event ``run.undismissed``. Whether this call did: a run
    not dismissed is left as it is, with nothing recorded."""
    return _set(run_id, dismissed=False, user=user)


def _set(run_id: UUID, *, dismissed: bool, user: AnyUser | None) -> bool:
    with run_scope(run_id, needs_definition=False) as scope:
        run = scope.run
        (DISMISS if dismissed else UNDISMISS).check(run_id, run.status)
        now_dismissed = (
            Run.objects.filter(pk=run.pk).values_list("dismissed_at", flat=True).get() is not None
        )
        if now_dismissed == dismissed:
            return False
        signed_in = user if isinstance(user, get_user_model()) else None
        if not cas_update(
            Run,
            run.pk,
            version=run.version,
            where={"status": run.status},
            dismissed_at=db_now() if dismissed else None,
            dismissed_by=signed_in if dismissed else None,
            updated_at=db_now(),
        ):
            raise StaleState(f"run {run.pk} changed while it was being dismissed", run=str(run.pk))
        run.version += 1
        scope.events.add(
            run.pk, "run.dismissed" if dismissed else "run.undismissed", by=actor(user)
        )
        return True
