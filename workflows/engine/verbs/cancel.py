"""Cancel a run: stop its forward work, then compensate (unless told not to) and end
``cancelled``; children of the run are cancelled afterwards, each in its own
transaction, child before parent."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from workflows.engine.events import actor
from workflows.engine.guards import CANCEL
from workflows.engine.runs import set_run_status, stop_forward_work, unwind
from workflows.engine.scope import run_scope
from workflows.engine.transaction import transition
from workflows.status import RunStatus

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


# A run in one of these was cancelled (or stopped harder) already: cancelling it again
# is a no-op, not an error, so a retried request or a second operator gets an answer.
ALREADY_CANCELLED = frozenset({RunStatus.CANCELLING, RunStatus.CANCELLED, RunStatus.TERMINATED})


@transition
def cancel_run(
    run_id: UUID,
    *,
    reason: str = "",
    compensate: bool = True,
    user: AnyUser | None = None,
    code: str = "cancelled",
) -> bool:
    """Stop a running or waiting run: cancel waiting work, compensate, end ``cancelled``.

    Running attempts finish (their results are recorded), stop at their next heartbeat
    (``RunCancelled``) or lose their lease; then the run's compensations run in reverse
    order unless ``compensate`` is false. Works on a run whose definition is no longer
    registered. Idempotent: a run already cancelling, cancelled or terminated is left as
    it is, with nothing recorded (no event, no new version), and ``False`` is returned;
    ``True`` when this call cancelled it. Other statuses the guard refuses raise
    :class:`InvalidTransition`. Two cancels racing: the second waits for the run's lock,
    then finds it cancelling and returns ``False``. ``code``: the run's error code
    (``flow_cancelled`` when ``cancel_flow`` cancels a member).
    """
    with run_scope(run_id, needs_definition=False) as scope:
        run, events = scope.run, scope.events
        if run.status in ALREADY_CANCELLED:
            return False
        CANCEL.check(run_id, run.status)
        stop_forward_work(run, events, reason="run cancelled")
        error = {"code": code, "message": reason or "cancelled", "by": actor(user)}
        changes: dict[str, Any] = {"error": error}
        if not compensate:
            changes["skip_compensation"] = True
            run.skip_compensation = True
        set_run_status(run, RunStatus.CANCELLING, events, **changes)
        events.add(
            run.pk, "run.cancel_requested", by=actor(user), reason=reason, compensate=compensate
        )
        unwind(run, events)
    return True
