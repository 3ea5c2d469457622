"""What must hold however processes die: checked on the rows themselves.

Each check returns a list of problems (empty when all is well), so a failing test says
exactly which run, step or key broke the rule.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django_q.models import Task as QueueTask

from tests.acceptance.flowapp.models import HandlerCall, SideEffect
from workflows.models import Event, Run, Step
from workflows.status import RUN_FINAL, STEP_FINAL, StepStatus


@dataclass(frozen=True)
class Seen:
    """A row as one sample saw it."""

    status: str
    version: int
    output: Any


class StateMonitor:
    """Samples every run and step again and again, and notes anything that went backwards.

    A version must never decrease; a row must not change without its version going up;
    a row in a final state must never change again. Sampling while processes are being
    killed is what catches a stale worker overwriting newer state.
    """

    def __init__(self) -> None:
        self.seen: dict[tuple[str, Any], Seen] = {}
        self.problems: list[str] = []
        self.samples = 0

    def sample(self) -> None:
        runs = Run.objects.values_list("pk", "status", "version", "output")
        steps = Step.objects.values_list("pk", "status", "version", "output")
        for kind, rows, final in (("run", runs, RUN_FINAL), ("step", steps, STEP_FINAL)):
            for pk, status, version, output in rows:
                self._compare(kind, pk, Seen(status, version, output), final)
        self.samples += 1

    def _compare(self, kind: str, pk: Any, now: Seen, final: frozenset[str]) -> None:
        before = self.seen.get((kind, pk))
        if before is not None and now != before:
            where = f"{kind} {pk}: {before} -> {now}"
            if now.version < before.version:
                self.problems.append(f"version went back, {where}")
                return  # keep the newer sample, so the rollback is reported once
            if now.version == before.version:
                self.problems.append(f"changed without a new version, {where}")
            if before.status in final:
                self.problems.append(f"changed after reaching a final state, {where}")
        self.seen[(kind, pk)] = now


def completion_problems(run_ids: Iterable[UUID]) -> list[str]:
    """Exactly one ``step.completed`` event per completed step, and none for other steps."""
    run_ids = list(run_ids)
    completed = set(
        Step.objects.filter(run__in=run_ids, status=StepStatus.COMPLETED).values_list(
            "pk", flat=True
        )
    )
    events = Counter(
        Event.objects.filter(run__in=run_ids, type="step.completed").values_list(
            "step_id", flat=True
        )
    )
    return [
        f"step {pk} is completed with {events[pk]} step.completed events"
        for pk in sorted(completed)
        if events[pk] != 1
    ] + [
        f"step {pk} has {n} step.completed events but is not completed"
        for pk, n in sorted(events.items())
        if pk not in completed
    ]


def idempotency_problems(run_ids: Iterable[UUID]) -> list[str]:
    """Every call of a step saw that step's one key; each completed task's effect happened once.

    The effect table is unique per key, like an external system that deduplicates; the
    engine's part is that every attempt of one step presents the same key, and that a
    completed step's handler did reach its effect.
    """
    run_ids = list(run_ids)
    problems = []
    keys_seen: dict[tuple[UUID, str], set[str]] = defaultdict(set)
    calls = HandlerCall.objects.filter(run_id__in=run_ids)
    for run_id, step_name, key in calls.values_list("run_id", "step_name", "idempotency_key"):
        keys_seen[(run_id, step_name)].add(key)
    for (run_id, step_name), keys in sorted(keys_seen.items(), key=str):
        if keys != {f"{run_id}/{step_name}"}:
            problems.append(f"calls of {run_id}/{step_name} saw keys {sorted(keys)}")
    effects = Counter(
        SideEffect.objects.filter(run_id__in=run_ids).values_list("idempotency_key", flat=True)
    )
    completed_tasks = Step.objects.filter(
        run__in=run_ids, status=StepStatus.COMPLETED, kind="task"
    ).values_list("run_id", "name")
    for run_id, name in completed_tasks:
        key = f"{run_id}/{name}"
        if effects[key] != 1:
            problems.append(f"completed step {key} has {effects[key]} side effects")
    return problems


def _text(value: Any) -> str:
    return json.dumps(value) if value is not None else ""


def lock_error_problems() -> list[str]:
    """ "database is locked" must never reach a run's or step's error, or a queue result."""
    found = [
        f"{model.__name__} {pk}: {error}"
        for model in (Run, Step)
        for pk, error in model.objects.filter(error__isnull=False).values_list("pk", "error")
        if "locked" in _text(error)
    ]
    found += [
        f"queue task {name}: {result}"
        for name, result in QueueTask.objects.filter(success=False).values_list("name", "result")
        if "locked" in str(result)
    ]
    return found


def queue_failures() -> list[str]:
    """Queue tasks that raised: ``run_step`` never should (a lost race returns 0)."""
    return [
        f"{name}: {str(result)[-500:]}"
        for name, result in QueueTask.objects.filter(success=False).values_list("name", "result")
    ]


def most_active_at_once(runs: Iterable[UUID] | None = None, *, workflow: str = "") -> int:
    """The most runs active at one point of the history (of ``runs``, or of ``workflow``):
    a run is active from its ``run.started`` to its final status, in event order.

    Event ids give that order on PostgreSQL too, although they are taken at insert: a
    queued run can only start once the transaction that freed its place has committed,
    so its ``run.started`` is inserted after that run's final event.
    """
    history = Event.objects.order_by("id")
    if runs is not None:
        history = history.filter(run_id__in=list(runs))
    if workflow:
        history = history.filter(run__workflow_name=workflow)
    final = {f"run.{status}" for status in RUN_FINAL}
    active: set[UUID] = set()
    most = 0
    for run_id, kind in history.values_list("run_id", "type"):
        if kind == "run.started":
            active.add(run_id)
        elif kind in final:
            active.discard(run_id)
        most = max(most, len(active))
    return most
