"""One schedule's due slots decided, and the slots it buffered started.

A pass over a schedule (:func:`fire_schedule`) is one transition that first claims the
row (a compare-and-set on ``version``: of two sweepers, one decides and the other finds
nothing to do), then, for each slot whose fire time has come, oldest first:

- a slot older than ``catchup_window`` before now is **missed**: recorded, not started
  (one ``schedule.missed`` event per pass, with the count and the first and last slot);
- otherwise, when no earlier run of the schedule is live (or the policy is
  ``allow_all``), its run **starts** (:func:`.slot_runs.start_slot`);
- otherwise the overlap policy decides: ``skip`` records it skipped; ``buffer_one``
  keeps it waiting unless a slot waits already (then it is skipped); ``buffer_all``
  keeps every one (up to :data:`BUFFER_LIMIT`); ``cancel_other`` and
  ``terminate_other`` keep it waiting, replacing a slot that waited (skipped), and name
  the live runs for the caller to stop once this transition commits.

Then the waiting slots start, oldest first, while no earlier run is live. The row is
written back with the next slot, the waiting slots and the counters, still under the
claim. A pass decides at most :data:`SLOTS_PER_PASS` slots of one schedule; the rest
are the next pass's.

A slot whose workflow is no longer registered, or whose input no longer fits it, is
recorded missed with the reason: the schedule goes on and says why it started nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.db.models import F

from workflows.definitions.schedules import Overlap, fire_time, slots_after
from workflows.engine.schedules.history import ScheduleHistory
from workflows.engine.schedules.slot_runs import start_slot
from workflows.engine.transaction import transition
from workflows.errors import DefinitionMissing, InvalidInput
from workflows.models import Run, Schedule
from workflows.status import RUN_FINAL

SLOTS_PER_PASS = 100
"""The most slots one pass decides for one schedule (catch-up after a long stop of a
schedule every second would otherwise be one huge transaction)."""

BUFFER_LIMIT = 1000
"""The most slots ``buffer_all`` keeps waiting; later ones are skipped."""

STOPPING = frozenset({Overlap.CANCEL_OTHER.value, Overlap.TERMINATE_OTHER.value})


@dataclass
class Firing:
    """What one pass over a schedule did."""

    claimed: bool = False
    started: list[UUID] = field(default_factory=list)
    skipped: int = 0
    missed: int = 0
    buffered: int = 0
    # Live runs the policy (cancel_other, terminate_other) asks the caller to stop.
    stop: list[UUID] = field(default_factory=list)
    overlap: str = ""
    key: str = ""


def live_runs(schedule_id: int) -> list[UUID]:
    """The schedule's runs that have not ended (the partial index of live scheduled runs)."""
    return list(
        Run.objects.filter(schedule_id=schedule_id)
        .exclude(status__in=RUN_FINAL)
        .values_list("id", flat=True)
    )


@transition
def fire_schedule(schedule_id: int, now: datetime) -> Firing:
    """Decide the slots of schedule ``schedule_id`` due at ``now`` and start what may
    start; see the module. Nothing to do (paused, deleted, another sweeper first): an
    unclaimed :class:`Firing`."""
    schedule = Schedule.objects.filter(pk=schedule_id, paused=False).first()
    if schedule is None:
        return Firing()
    claimed = Schedule.objects.filter(pk=schedule.pk, version=schedule.version).update(
        version=F("version") + 1
    )
    if not claimed:
        return Firing()
    schedule.version += 1
    pass_ = _Pass(schedule, now)
    pass_.decide_due()
    pass_.start_waiting()
    pass_.save()
    return pass_.firing


class _Pass:
    """One pass's decisions over a claimed schedule, and the row they leave."""

    def __init__(self, schedule: Schedule, now: datetime) -> None:
        self.schedule = schedule
        self.now = now
        self.history = ScheduleHistory(schedule)
        self.live = live_runs(schedule.pk)
        self.waiting = schedule.buffered_slots()
        self.firing = Firing(claimed=True, overlap=schedule.overlap, key=schedule.key)
        self.missed: list[datetime] = []
        self.reasons: dict[str, str] = {}
        self.last_run: UUID | None = None
        self.next_slot = schedule.next_slot_at

    def decide_due(self) -> None:
        schedule, slot = self.schedule, self.next_slot
        oldest_kept = self.now - schedule.catchup_window
        decided = 0
        while slot is not None and decided < SLOTS_PER_PASS:
            if fire_time(slot, schedule.jitter, schedule.key) > self.now:
                break
            decided += 1
            if slot < oldest_kept:
                self.missed.append(slot)
            else:
                self._decide(slot)
            slot = next(slots_after(schedule, slot), None)
        self.next_slot = slot

    def _decide(self, slot: datetime) -> None:
        policy = self.schedule.overlap
        if not self.live or policy == Overlap.ALLOW_ALL:
            self._start(slot, how="slot")
        elif policy == Overlap.SKIP:
            self._skip(slot, "an earlier run of the schedule has not ended")
        elif policy == Overlap.BUFFER_ONE:
            if self.waiting:
                self._skip(slot, "a slot already waits for the earlier run (buffer_one)")
            else:
                self._wait(slot)
        elif policy == Overlap.BUFFER_ALL:
            if len(self.waiting) >= BUFFER_LIMIT:
                self._skip(slot, f"{BUFFER_LIMIT} slots already wait (buffer_all)")
            else:
                self._wait(slot)
        else:  # cancel_other, terminate_other: the newest slot replaces one that waited
            for older in self.waiting:
                self._skip(older, "a later slot replaced it")
            self.waiting = []
            self._wait(slot)
            self.firing.stop = list(self.live)

    def start_waiting(self) -> None:
        while self.waiting and not self.live:
            self._start(self.waiting.pop(0), how="buffered")
        if self.waiting and self.schedule.overlap in STOPPING:
            self.firing.stop = list(self.live)

    def _start(self, slot: datetime, *, how: str) -> None:
        late = self.now - fire_time(slot, self.schedule.jitter, self.schedule.key)
        try:
            started = start_slot(
                self.schedule,
                slot,
                self.history,
                how=how,
                late_ms=max(int(late / timedelta(milliseconds=1)), 0),
            )
        except (DefinitionMissing, InvalidInput) as exc:
            self.missed.append(slot)
            self.reasons[slot.isoformat()] = str(exc)
            return
        run = started.value
        if started.created:
            self.firing.started.append(run.pk)
            self.last_run = run.pk
        if run.status not in RUN_FINAL:
            self.live.append(run.pk)

    def _skip(self, slot: datetime, reason: str) -> None:
        self.firing.skipped += 1
        self.history.add(
            "schedule.skipped",
            slot=slot.isoformat(),
            reason=reason,
            live=[str(pk) for pk in self.live[:10]],
        )

    def _wait(self, slot: datetime) -> None:
        self.firing.buffered += 1
        self.waiting.append(slot)
        self.history.add("schedule.buffered", slot=slot.isoformat(), overlap=self.schedule.overlap)

    def save(self) -> None:
        schedule, firing = self.schedule, self.firing
        firing.missed = len(self.missed)
        if self.missed:
            about: dict[str, Any] = {"reasons": self.reasons} if self.reasons else {}
            self.history.add(
                "schedule.missed",
                count=len(self.missed),
                first=self.missed[0].isoformat(),
                last=self.missed[-1].isoformat(),
                **about,
            )
        next_slot = self.next_slot
        changes: dict[str, Any] = {
            "next_slot_at": next_slot,
            "next_fire_at": (
                fire_time(next_slot, schedule.jitter, schedule.key) if next_slot else None
            ),
            "buffered": [slot.isoformat() for slot in self.waiting],
            "buffered_count": len(self.waiting),
            "fired_count": F("fired_count") + len(firing.started),
            "skipped_count": F("skipped_count") + firing.skipped,
            "missed_count": F("missed_count") + firing.missed,
            "version": F("version") + 1,
        }
        if self.last_run is not None:
            changes.update(last_run_id=self.last_run, last_fired_at=self.now)
        written = Schedule.objects.filter(pk=schedule.pk, version=schedule.version).update(
            **changes
        )
        assert written == 1, "the claim of this transaction holds the row"
        self.history.flush()
