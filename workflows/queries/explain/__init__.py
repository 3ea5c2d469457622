"""``explain(run)``: what a run waits on, what an operator may do about it, and whether it
needs attention, as data that every surface (commands, admin, API) shows alike.

Read side, like :mod:`workflows.queries`: nothing here writes or opens a transaction
(under SQLite's IMMEDIATE mode even a read-only ``atomic()`` takes the write lock).

An explanation costs :data:`QUERIES` queries whatever the size of the run: each table
is read once for the whole run, fan-out items are counted by one grouped query and
only the items in hand are loaded, and the database computes the flags (lease
expired, timer overdue, work undispatched) and the attention class from the predicates
in :mod:`workflows.queries`, the same ones that filter a list of runs by attention.
The reads are not one snapshot: a run moving meanwhile may show a step a moment newer
than the run row, which an operator's view can live with.

Ready work that does not start says why, most specific first: no running worker serves
its route (``worker``; one more query, the live workers, when the run has ready work
and workers run it), a limit holds it (``concurrency``, ``rate``, ``budget``, from the
``held_on`` the claim wrote; a concurrency hold adds one query per limit for its held
slots, at most :data:`CONCURRENCY_KEYS_COUNTED`), else it waits for a worker to pick it
up (``dispatch``). Ready external work (``Task(external=True)``) waits for an external
worker to claim it from its queue (``external``). A ``queued`` run waits for a place
under ``max_concurrent_runs``.

A flow member's explanation says its place in the flow (``flow``: the flow, its join,
its upstream members and their statuses, and for a member cancelled with
``dependency_failed`` the upstream that failed), read with two more queries for flow
members only (:data:`FLOW_QUERIES`). A ``blocked`` member waits on its upstream members
under its join (a ``blocked`` entry, in words); one whose join is already decided says the
``repair_flows`` scanner will start or cancel it.

A run with a deadline says when it falls and how long is left (``deadline``,
``time_left``: negative once it passed). An ended run's replay verbs say why not where
what became of its completed work refuses them (:mod:`workflows.engine.replay`): the
run's ``retry``, and a ``rerun`` entry per step a rerun may not start from, read with one
more query for ended runs of workflows that declare compensations
(:data:`REPLAY_QUERIES`).

A run whose workflow declares loops says where each stands (``loops``, one entry per
``Loop`` node and per polling task, read from the definition and the rows already
read: no query): the round it is in, its bound, and in words what ends it. A polling
task between two iterations waits on its ``repeat`` timer (a ``poll`` entry of
``waiting_on``, with the time of its next poll), not on a callback.

Each step says the failure class of its last failed attempt (``failure_class``) and,
while that attempt is its last one (the step failed, waits for its retry, or is ready
again after a reclaim or a revoke), says so in words: ``last_failure``, ``"last attempt
failed: timeout"``.


Each entry of ``waiting_on`` has a :class:`~workflows.holds.HoldKind` as its ``kind``: the
table in :mod:`workflows.holds` says how it reads for a person and what releases it.

The package has a module a job: :mod:`.reads` (the queries), :mod:`.reading` (what
they returned, indexed), :mod:`.run_holds`, :mod:`.step_holds`, :mod:`.unit_holds` and
:mod:`.flow_place` (what holds the run), :mod:`.actions` (the verbs and their verdicts),
:mod:`.loops` (where loops stand) and :mod:`.records` (what it returns).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from django.utils import timezone

from workflows.engine.executor import uses_django_q
from workflows.engine.work_kinds import COMPENSATION, ITEM, STEP
from workflows.models import Run
from workflows.queries.explain.actions import REPLAY_QUERIES, allowed_actions, replay_refusals
from workflows.queries.explain.flow_place import (
    FLOW_QUERIES,
    blocked,
    dependency_unmet,
    flow_place,
)
from workflows.queries.explain.loops import loops
from workflows.queries.explain.reading import Reading, Unit, unit_of
from workflows.queries.explain.reads import (
    CONCURRENCY_KEYS_COUNTED,
    QUERIES,
    compensations_in_hand,
    held_slots,
    item_counts,
    items_in_hand,
    last_failure,
    live_children,
    live_worker_routes,
    run_row,
    scheduled_timers,
    steps_of,
    telemetry,
)
from workflows.queries.explain.records import Action, Explanation, FlowPlace, WaitingOn
from workflows.queries.explain.run_holds import paused, queued
from workflows.queries.explain.step_holds import (
    UNTOLD_TIMERS,
    child,
    compensation,
    step_hold,
    timer,
)
from workflows.queries.explain.unit_holds import lease, ready
from workflows.status import STEP_FINAL, StepStatus, attempt_in_round

__all__ = [
    "CONCURRENCY_KEYS_COUNTED",
    "FLOW_QUERIES",
    "QUERIES",
    "REPLAY_QUERIES",
    "Action",
    "Explanation",
    "FlowPlace",
    "WaitingOn",
    "explain",
]


def explain(run: Run | UUID | str, *, now: datetime | None = None) -> Explanation:
    """Explain ``run`` (a run or its id) as it stands now; see the module docstring.

    ``now`` (default: this host's clock) is the moment leases, timers and ready work are
    judged at; tests pass a later one to let time pass. Raises
    :class:`~workflows.RunNotFound` for an unknown or malformed id.
    """
    now = now or timezone.now()
    row = run_row(run.pk if isinstance(run, Run) else run, now)
    steps = steps_of(row.pk, now)
    timers = scheduled_timers(row.pk, now)
    reading = Reading(row, steps, timers, item_counts(row.pk))
    reading.cancel_requested_at = row.cancel_requested_at
    items = items_in_hand(row.pk, now)
    compensations = compensations_in_hand(row.pk, now)
    children = live_children(row.pk)
    place = flow_place(row) if row.flow_id is not None else None
    units = [
        *(unit_of(STEP, step, item=None) for step in steps),
        *(unit_of(ITEM, item, item=item["item_key"]) for item in items),
        *(unit_of(COMPENSATION, record, item=record["item_key"]) for record in compensations),
    ]
    waiting_on = [
        *paused(row),
        *queued(row),
        *blocked(row, place),
        *(
            entry
            for step in steps
            if step["status"] not in STEP_FINAL and (entry := step_hold(reading, step))
        ),
        *(child(reading, run_child) for run_child in children),
        *(compensation(reading, record) for record in compensations),
        # A release timer is told by its unit's rate hold, with its due time; a deadline
        # holds nothing (it ends the run): ``deadline`` and ``time_left`` tell it.
        *(timer(reading, row_) for row_ in timers if row_["kind"] not in UNTOLD_TIMERS),
        *_work_in_hand(reading, units, now),
    ]
    return Explanation(
        run=row.pk,
        workflow=row.workflow_name,
        workflow_version=row.workflow_version,
        status=row.status,
        version=row.version,
        attention=row.attention,
        as_of=now,
        waiting_on=tuple(waiting_on),
        allowed_actions=tuple(
            allowed_actions(
                row.status,
                steps,
                replay_refusals(row, steps),
                dependency_unmet(row, place),
                dismissed=row.dismissed_at is not None,
            )
        ),
        steps=tuple(_step_entry(step) for step in steps),
        flow=place,
        deadline=row.deadline,
        loops=tuple(loops(reading, steps)),
    )


def _work_in_hand(reading: Reading, units: list[Unit], now: datetime) -> list[WaitingOn]:
    """Leases held, then ready work and why it has not started. The live workers are
    read only when there is ready work that workers of the cluster run (not external
    work), held slots only for ready work a concurrency limit holds."""
    in_hand = [unit for unit in units if unit.status == StepStatus.READY]
    if any(not unit.route.external for unit in in_hand) and uses_django_q():
        reading.workers = live_worker_routes(now)
    reading.held_slots = held_slots(in_hand)
    return [
        *(lease(reading, unit) for unit in units if unit.holds_lease),
        *(ready(reading, unit) for unit in in_hand),
    ]


def _step_entry(step: dict[str, Any]) -> dict[str, Any]:
    """A step as the explanation lists it: attempts numbered within its round."""
    return {
        "id": step["id"],
        "name": step["name"],
        "kind": step["kind"],
        "status": step["status"],
        **attempt_in_round(
            step["attempt"], step["max_attempts"], step["round_attempts_before"]
        )._asdict(),
        "iteration": step["iteration"],
        "failure_class": step["failure_class"] or None,
        "last_failure": last_failure(step),
        **telemetry(step),
    }
