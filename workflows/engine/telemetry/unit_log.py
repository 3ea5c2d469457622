"""The telemetry of a fan-out item's or a compensation's attempt, kept on its own row.

The same calls as a task step's (``ctx.progress``, ``ctx.log``, ``ctx.summary``), the
same fence: one compare-and-set of the unit's row by (``id``, ``version``, ``attempt``,
``lease_owner``, ``running``, a live lease), so a stale attempt's write is refused with
:class:`~workflows.LeaseLost` and changes nothing. Its log frames live on the row
(``log``, a JSON list of ``{seq, attempt, stream, text, at}``), numbered by
``frames_written`` and bounded: the newest :data:`UNIT_FRAMES` frames of at most
:data:`UNIT_FRAME_BYTES` bytes of text stay, the older ones are counted in
``frames_dropped``. A unit is one item of many, so its log is a short tail, not a
step's full stream.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from workflows.engine.lease import Lease
from workflows.engine.sql.expressions import counter_plus, db_now
from workflows.engine.sql.updates import LIVE_LEASE, cas_update
from workflows.engine.telemetry.pending import PendingTelemetry
from workflows.engine.transaction import transition
from workflows.errors import LeaseLost
from workflows.merge_patch import merge_patch
from workflows.models import CompensationRecord, FanOutItem

# The rows a unit's telemetry goes to, by work kind name.
_UNIT_MODELS: dict[str, type[FanOutItem] | type[CompensationRecord]] = {
    "item": FanOutItem,
    "compensation": CompensationRecord,
}

# The bound of a unit's log: its newest frames, and their text's bytes in UTF-8.
UNIT_FRAMES = 200
UNIT_FRAME_BYTES = 64 * 1024


@transition
def flush_unit_telemetry(lease: Lease, pending: PendingTelemetry) -> None:
    """Write ``pending`` for ``lease``'s attempt of an item or a compensation, or raise
    ``LeaseLost`` (nothing written). The caller moves ``lease.version`` on."""
    model: type[FanOutItem] | type[CompensationRecord] = _UNIT_MODELS[lease.kind.name]
    row = (
        model.objects.filter(pk=lease.unit_id)
        .values("summary", "log", "frames_written", "frames_dropped")
        .first()
    )
    changes: dict[str, Any] = {"updated_at": db_now()}
    if row is not None:
        if pending.progress is not None:
            done, total, message = pending.progress
            changes.update(
                progress_done=done,
                progress_total=total,
                progress_message=message,
                progress_at=db_now(),
            )
        if pending.patches:
            summary = row["summary"]
            for patch in pending.patches:
                summary = merge_patch(summary, patch)
            changes.update(
                summary=summary,
                summary_version=counter_plus("summary_version", len(pending.patches)),
            )
        if pending.frames:
            log, dropped = _appended(row["log"] or [], row["frames_written"], lease, pending)
            changes.update(
                log=log,
                frames_written=row["frames_written"] + len(pending.frames),
                frames_dropped=row["frames_dropped"] + dropped,
            )
    if row is None or not cas_update(
        model,
        lease.unit_id,
        version=lease.version,
        where={
            "attempt": lease.attempt,
            "lease_owner": lease.owner,
            "status": "running",
            **LIVE_LEASE,
        },
        **changes,
    ):
        raise LeaseLost(
            f"telemetry of {lease.label} attempt {lease.attempt} by {lease.owner!r} rejected: "
            "the attempt no longer holds its lease",
            step=lease.step_name,
            attempt=lease.attempt,
        )


def _appended(
    log: list[dict[str, Any]], written: int, lease: Lease, pending: PendingTelemetry
) -> tuple[list[dict[str, Any]], int]:
    """``log`` with the pending frames appended (numbered on from ``written``), trimmed
    oldest first to the bound; and how many frames the trim dropped."""
    merged = list(log)
    for offset, (stream, text, at, _) in enumerate(pending.frames, start=1):
        merged.append(
            {
                "seq": written + offset,
                "attempt": lease.attempt,
                "stream": stream,
                "text": text,
                "at": datetime.fromtimestamp(at, tz=UTC).isoformat(),
            }
        )
    total = sum(len(frame["text"].encode()) for frame in merged)
    keep_from = 0
    while keep_from < len(merged) and (
        len(merged) - keep_from > UNIT_FRAMES or total > UNIT_FRAME_BYTES
    ):
        total -= len(merged[keep_from]["text"].encode())
        keep_from += 1
    return merged[keep_from:], keep_from
