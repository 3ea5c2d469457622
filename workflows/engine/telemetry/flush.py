"""The fenced write of a running attempt's telemetry: progress, log frames, summary.

One transition: a compare-and-set of the step row fenced like the attempt's heartbeat
(``id``, ``version``, ``attempt``, ``lease_owner``, ``running``, and the lease live on
the database clock: a worker that stalled past its lease writes nothing, not even its
log, :func:`workflows.engine.outcomes.heartbeat`) sets the progress and
the summary and moves ``frames_written`` on by the number of new frames, returning it:
the new frames are numbered up to it, so numbering goes on across attempts and never
repeats (an attempt that crashed after a flush leaves its frames and its count). Then
one insert of the frames (:mod:`workflows.engine.sql.frames`), and one delete of the
oldest frames past the attempt's bound (:mod:`.trimming`). A fence that matches no row raises
:class:`~workflows.LeaseLost` and the transaction writes nothing: a worker stopped and
resumed after its work was reclaimed cannot add to the new attempt's log.

A flush does not extend the lease: a log line is not a heartbeat, and the step's
timeout still bounds an attempt that logs. ``ctx.heartbeat()`` flushes first, then
extends the lease in its own transition.
"""

from __future__ import annotations

from typing import Any

from workflows.engine.lease import Lease
from workflows.engine.sql.expressions import counter_plus, db_now
from workflows.engine.sql.frames import insert_frames
from workflows.engine.sql.updates import LIVE_LEASE, cas_update_many
from workflows.engine.telemetry.pending import PendingTelemetry
from workflows.engine.telemetry.trimming import FrameBudget, Trim
from workflows.engine.telemetry.unit_log import flush_unit_telemetry
from workflows.engine.transaction import transition
from workflows.engine.wakeups import wake
from workflows.errors import LeaseLost
from workflows.merge_patch import merge_patch
from workflows.models import Frame, Step
from workflows.status import StepStatus


def flush_telemetry(lease: Lease, pending: PendingTelemetry, budget: FrameBudget) -> None:
    """Write ``pending`` for ``lease``'s attempt of a task step, or raise ``LeaseLost``.

    On success ``lease.version`` moves on (as a heartbeat's does) and ``budget``
    accounts for the frames kept. Wakes ``frames:<step id>`` once committed. The
    attempt of a fan-out item or a compensation writes to its own row instead
    (:func:`workflows.engine.telemetry.unit_log.flush_unit_telemetry`), fenced the same way.
    """
    if lease.kind.model is not Step:
        flush_unit_telemetry(lease, pending)
        lease.version += 1
        return
    sizes = [size for _, _, _, size in pending.frames]
    trim = budget.plan(sizes)
    first_seq = _flush(lease, pending, trim)
    lease.version += 1
    budget.apply(trim, first_seq, sizes)


@transition
def _flush(lease: Lease, pending: PendingTelemetry, trim: Trim) -> int:
    """The flush's transaction; returns the seq of the first new frame."""
    changes: dict[str, Any] = {}
    if pending.progress is not None:
        done, total, message = pending.progress
        changes.update(
            progress_done=done, progress_total=total, progress_message=message, progress_at=db_now()
        )
    if pending.patches:
        changes.update(
            summary=_patched(lease.step_id, pending.patches),
            summary_version=counter_plus("summary_version", len(pending.patches)),
        )
    count = len(pending.frames)
    if count:
        changes["frames_written"] = counter_plus("frames_written", count)
    if trim.dropped:
        changes["frames_dropped"] = counter_plus("frames_dropped", trim.dropped)
    updated = cas_update_many(
        Step,
        where={
            "id": lease.step_id,
            "version": lease.version,
            "attempt": lease.attempt,
            "lease_owner": lease.owner,
            "status": StepStatus.RUNNING,
            **LIVE_LEASE,
        },
        returning=("frames_written",),
        **changes,
    )
    if not updated:
        raise LeaseLost(
            f"telemetry of {lease.label} attempt {lease.attempt} by {lease.owner!r} rejected: "
            "the attempt no longer holds its lease",
            step=lease.step_name,
            attempt=lease.attempt,
        )
    first_seq = updated[0][0] - count + 1
    insert_frames(
        lease.step_id,
        lease.attempt,
        first_seq + trim.new,
        [(stream, text, at) for stream, text, at, _ in pending.frames[trim.new :]],
    )
    if trim.old:
        Frame.objects.filter(
            step_id=lease.step_id, attempt=lease.attempt, seq__lte=trim.old_through
        ).delete()
    wake(f"frames:{lease.step_id}")
    return first_seq


def _patched(step_id: int, patches: list[dict[str, Any]]) -> dict[str, Any]:
    """The step's summary with ``patches`` applied in order, read in the flush's
    transaction: its fenced update fails if anyone changed the row since. The patches
    are the attempt's own copies (``ctx.summary`` copies what it is given)."""
    summary: Any = Step.objects.filter(pk=step_id).values_list("summary", flat=True).first()
    for patch in patches:
        summary = merge_patch(summary, patch)
    return summary
