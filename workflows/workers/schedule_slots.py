"""The sweeper's pass over schedules: every slot due fires, every waiting slot whose
earlier runs ended starts, and the runs an overlap policy replaces are stopped.

One statement finds the candidates, whatever the number of schedules (a partial index
of unpaused schedules by next fire time, and one of schedules holding waiting slots);
each candidate is then one transition (:func:`workflows.engine.schedules.firing.
fire_schedule`), so a pass with nothing due costs one statement. Several sweepers may
run it at once: each schedule is decided by whichever claims its row first.

``cancel_other`` and ``terminate_other`` stop the earlier runs after the decision has
committed (a cancel is its own transition, with its children and compensation); a
crash in between leaves the slot waiting with the earlier runs live, and the next pass
stops them again. After ``terminate_other`` the waiting slot starts in the same pass.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db.models import Exists, OuterRef, Q

from workflows.engine.schedules.firing import STOPPING, Firing, fire_schedule
from workflows.engine.sql.clock import database_now
from workflows.models import Run, Schedule
from workflows.services import cancel_run, terminate_run
from workflows.status import RUN_ALIVE, RUN_FINAL
from workflows.workers.scanners import ScanResult

logger = logging.getLogger("workflows.schedules")

PASS_LIMIT = 100
"""The most schedules one pass decides (the earliest due first); the rest are next."""


def candidates(now: datetime, limit: int = PASS_LIMIT) -> list[int]:
    """Unpaused schedules with a slot due at ``now``, or holding waiting slots that may
    start (no live run) or whose policy must stop live runs."""
    live = Run.objects.filter(schedule=OuterRef("pk")).exclude(status__in=RUN_FINAL)
    stoppable = live.filter(status__in=RUN_ALIVE)
    due = Q(next_fire_at__lte=now)
    waiting = Q(buffered_count__gt=0) & (
        ~Exists(live) | (Q(overlap__in=STOPPING) & Exists(stoppable))
    )
    return list(
        Schedule.objects.filter(due | waiting, paused=False)
        .order_by("next_fire_at")
        .values_list("id", flat=True)[:limit]
    )


def fire_due_schedules(*, now: datetime | None = None, limit: int = PASS_LIMIT) -> ScanResult:
    """Fire what is due at ``now`` (default: the database clock); see the module."""
    when = now or database_now()
    ids = candidates(when, limit)
    result = ScanResult(found=len(ids))
    for pk in ids:
        try:
            firing = fire_schedule(pk, when)
        except Exception:
            result.errors += 1
            logger.exception("schedule %s: firing failed; continuing", pk)
            continue
        if not firing.claimed:
            result.skipped += 1
            continue
        result.done += 1
        if firing.stop:
            _stop(firing)
            if firing.overlap == "terminate_other":
                fire_schedule(pk, now or database_now())
    return result


def _stop(firing: Firing) -> None:
    """Cancel or terminate the runs a slot replaces (idempotent: a run already stopping
    or ended is left as it is)."""
    reason = f"schedule {firing.key!r}: a later slot replaces this run ({firing.overlap})"
    for run_id in firing.stop:
        try:
            if firing.overlap == "terminate_other":
                terminate_run(run_id, reason=reason)
            else:
                cancel_run(run_id, reason=reason)
        except Exception:
            logger.exception("schedule %r: stopping run %s failed", firing.key, run_id)
