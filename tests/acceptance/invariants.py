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
from workflows.models import Event, Flow, FlowEdge, FlowMember, Run, Step
from workflows.status import RUN_FINAL, STEP_FINAL, FlowStatus, JoinKind, RunStatus, StepStatus


@dataclass(frozen=True)
class Seen:
    """A row as one sample saw it (a run's generation is always 0)."""

    status: str
    version: int
    output: Any
    generation: int = 0


class StateMonitor:
    """Samples every run and step again and again, and notes anything that went backwards.

    A version must never decrease; a row must not change without its version going up;
    a row in a final state must never change again, but for a step starting a new
    generation (a loop's next iteration, a rerun). Sampling while processes are being
    killed is what catches a stale worker overwriting newer state.
    """

    def __init__(self) -> None:
        self.seen: dict[tuple[str, Any], Seen] = {}
        self.problems: list[str] = []
        self.samples = 0

    def sample(self) -> None:
        runs = Run.objects.values_list("pk", "status", "version", "output")
        steps = Step.objects.values_list("pk", "status", "version", "output", "generation")
        for kind, rows, final in (("run", runs, RUN_FINAL), ("step", steps, STEP_FINAL)):
            for pk, *values in rows:
                self._compare(kind, pk, Seen(*values), final)
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
            if before.status in final and now.generation == before.generation:
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


def every_problem(run_ids: Iterable[UUID]) -> list[str]:
    """The checks a test of many runs makes, together: every completed step completed
    once (:func:`completion_problems`), every side effect done once
    (:func:`idempotency_problems`), "database is locked" nowhere
    (:func:`lock_error_problems`) and no queue task that raised (:func:`queue_failures`)."""
    ids = list(run_ids)
    return [
        *completion_problems(ids),
        *idempotency_problems(ids),
        *lock_error_problems(),
        *queue_failures(),
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


# A member's upstream "ended otherwise" (than completed): its join may become impossible.
_ENDED_OTHERWISE = tuple(f"run.{status}" for status in RUN_FINAL if status != RunStatus.COMPLETED)


def _join_met(kind: str, count: int | None, completed: int, upstreams: int) -> bool:
    """The join's rule as the contract states it, written apart from the engine's."""
    if kind == JoinKind.ALL:
        return completed == upstreams
    if kind == JoinKind.ANY:
        return completed >= 1 or upstreams == 0
    return completed >= (count or 0)


def _join_impossible(
    kind: str, count: int | None, ended_otherwise: int, upstreams: int, *, sealed: bool
) -> bool:
    """No outcome of the upstreams still pending could meet the join; a k join only once
    the flow is sealed (an open flow may give the member more upstreams)."""
    if kind == JoinKind.ALL:
        return ended_otherwise >= 1
    if kind == JoinKind.ANY:
        return upstreams > 0 and ended_otherwise == upstreams
    return sealed and upstreams - ended_otherwise < (count or 0)


@dataclass
class _FlowHistory:
    """The events of one flow that the flow checks compare, as event ids.

    Event ids order the history on PostgreSQL too, although they are taken at insert: a
    transition inserts its events at its end, after it read the upstream statuses it
    acted on, so an upstream end it saw committed has the smaller id; an end in the
    same transition is added to the history before the downstream decisions it causes.
    """

    completed: dict[UUID, int]  # run -> its run.completed
    ended_otherwise: dict[UUID, int]  # run -> its run.failed, run.cancelled, ...
    started: dict[UUID, list[int]]  # run -> its run.started events
    dependency_failed: dict[UUID, list[int]]  # run -> its flow.dependency_failed events
    ends: list[str]  # the flow's flow.completed / flow.failed events
    sealed: int | None  # the flow's flow.sealed

    @classmethod
    def of(cls, flow: Flow) -> _FlowHistory:
        history = cls({}, {}, defaultdict(list), defaultdict(list), [], None)
        types = ("run.completed", "run.started", *_ENDED_OTHERWISE)
        run_events = Event.objects.filter(run__flow=flow, type__in=types).order_by("id")
        for run_id, kind, pk in run_events.values_list("run_id", "type", "id"):
            if kind == "run.started":
                history.started[run_id].append(pk)
            elif kind == "run.completed":
                history.completed.setdefault(run_id, pk)
            else:
                history.ended_otherwise.setdefault(run_id, pk)
        flow_types = ("flow.sealed", "flow.completed", "flow.failed", "flow.dependency_failed")
        flow_events = Event.objects.filter(flow=flow, type__in=flow_types).order_by("id")
        for run_id, kind, pk in flow_events.values_list("run_id", "type", "id"):
            if kind == "flow.dependency_failed":
                history.dependency_failed[run_id].append(pk)
            elif kind == "flow.sealed":
                history.sealed = pk
            else:
                history.ends.append(kind)
        return history

    def completed_before(self, runs: Iterable[UUID], event: float) -> list[UUID]:
        return [run for run in runs if self.completed.get(run, event) < event]

    def ended_otherwise_before(self, runs: Iterable[UUID], event: float) -> list[UUID]:
        return [run for run in runs if self.ended_otherwise.get(run, event) < event]


def flow_problems(flow_ids: Iterable[UUID]) -> list[str]:
    """What must hold of sealed flows once every member has ended, from rows and history.

    - The flow ended as its members did: ``completed`` iff every member completed, else
      ``failed`` naming the others in its summary; one end event.
    - No member is still blocked; none started more than once.
    - A member started only once its join was met: its ``run.started`` follows the
      ``run.completed`` of enough upstream members (edges are added only while the
      downstream is blocked, so every edge it has now it had when it started).
    - A member whose join was never met did not start, ran no handler, and ended
      ``cancelled`` with ``dependency_failed`` once the join had become impossible,
      naming an upstream that ended otherwise than completed when there was one.
    """
    problems: list[str] = []
    for flow in Flow.objects.filter(pk__in=list(flow_ids)).order_by("created_at"):
        history = _FlowHistory.of(flow)
        members = list(FlowMember.objects.filter(flow=flow).select_related("run").order_by("id"))
        problems += _flow_end_problems(flow, members, history)
        upstreams: dict[int, list[tuple[str, UUID]]] = defaultdict(list)
        edges = FlowEdge.objects.filter(flow=flow).order_by("id")
        for down, name, run_id in edges.values_list(
            "downstream_id", "upstream__name", "upstream__run_id"
        ):
            upstreams[down].append((name, run_id))
        called = set(
            HandlerCall.objects.filter(run_id__in=[m.run_id for m in members]).values_list(
                "run_id", flat=True
            )
        )
        for member in members:
            problems += _member_problems(member, upstreams[member.pk], history, called)
    return problems


def _flow_end_problems(flow: Flow, members: list[FlowMember], history: _FlowHistory) -> list[str]:
    not_completed = {m.name: m.run.status for m in members if m.run.status != RunStatus.COMPLETED}
    expected = FlowStatus.FAILED if not_completed else FlowStatus.COMPLETED
    problems = []
    if flow.status != expected:
        problems.append(
            f"flow {flow.name} is {flow.status}, not {expected}: members not completed "
            f"{not_completed}"
        )
    elif flow.summary.get("not_completed") != not_completed:
        problems.append(
            f"flow {flow.name}'s summary names {flow.summary.get('not_completed')} as not "
            f"completed, its members are {not_completed}"
        )
    if history.ends != [f"flow.{flow.status}"]:
        problems.append(f"flow {flow.name} ({flow.status}) has end events {history.ends}")
    return problems


def _member_problems(
    member: FlowMember,
    upstreams: list[tuple[str, UUID]],
    history: _FlowHistory,
    called: set[UUID],
) -> list[str]:
    run = member.run
    kind, count = member.join, member.join_count
    join = f"{kind} {count}" if kind == JoinKind.AT_LEAST else kind
    who = f"member {member.name} ({run.pk}, join {join}, {len(upstreams)} upstreams)"
    names = {run_id: name for name, run_id in upstreams}
    starts = history.started.get(run.pk, [])
    problems = []
    if run.status == RunStatus.BLOCKED:
        problems.append(f"{who} is still blocked")
    if len(starts) > 1:
        problems.append(f"{who} started {len(starts)} times: events {starts}")
    if starts:
        done = history.completed_before(names, starts[0])
        if not _join_met(kind, count, len(done), len(upstreams)):
            problems.append(
                f"{who} started (event {starts[0]}) when only "
                f"{sorted(names[r] for r in done)} had completed"
            )
    done = history.completed_before(names, float("inf"))
    if _join_met(kind, count, len(done), len(upstreams)):
        if not starts:
            problems.append(
                f"{who} ended {run.status} without starting, although "
                f"{sorted(names[r] for r in done)} completed"
            )
        return problems
    if run.pk in called:
        problems.append(f"{who} never had its join met, yet a handler of it ran")
    error = run.error or {}
    if (run.status, error.get("code")) != (RunStatus.CANCELLED, "dependency_failed"):
        problems.append(
            f"{who} never had its join met, yet ended {run.status} with {error.get('code')!r}"
        )
    cancellations = history.dependency_failed.get(run.pk, [])
    if len(cancellations) != 1:
        return [*problems, f"{who} has flow.dependency_failed events {cancellations}"]
    [at] = cancellations
    ended = sorted(names[r] for r in history.ended_otherwise_before(names, at))
    sealed = history.sealed is not None and history.sealed < at
    if not _join_impossible(kind, count, len(ended), len(upstreams), sealed=sealed):
        problems.append(
            f"{who} was cancelled (event {at}) while its join could still be met: "
            f"ended otherwise {ended}, flow sealed before: {sealed}"
        )
    if ended and error.get("upstream") not in ended:
        problems.append(
            f"{who}'s dependency_failed (event {at}) names upstream {error.get('upstream')!r} "
            f"({error.get('upstream_status')}), not one that had ended otherwise: {ended}"
        )
    return problems
