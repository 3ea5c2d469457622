"""Sleep steps: a durable timer parks the step; firing it completes the step."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from workflows.definitions import Sleep
from workflows.engine.advance import Advancer, enters
from workflows.engine.sql.rows import StepRow
from workflows.engine.timers import fires
from workflows.status import StepStatus, TimerKind


@enters(Sleep)
def enter_sleep(advancer: Advancer, row: StepRow, node: Sleep) -> str:
    try:
        wake_at: datetime = node.wake_at(advancer.context_for(row), timezone.now())
    except Exception as exc:
        return advancer.fail_entering(row, exc, "sleep_error")
    advancer.park(row, TimerKind.SLEEP, wake_at, reason=Sleep.kind, until=wake_at.isoformat())
    return StepStatus.WAITING


@fires(TimerKind.SLEEP)
def wake(advancer: Advancer, row: StepRow) -> None:
    advancer.complete(row, {"woke_at": timezone.now().isoformat()})
    advancer.settled(row.name)
