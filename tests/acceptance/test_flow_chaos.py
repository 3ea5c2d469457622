"""Flows of 50 members with random edges, built while they run, on workers being killed.

Each flow is a random DAG (edges from lower to higher member index; joins "all", "any"
or k). Pytest builds the flows through the public API while their first members run on
a django-q2 cluster whose workers are SIGKILLed in the middle of steps every few
seconds (django-q2 starts new ones): half the members first, the rest once some have
started, then edges to members added already and a few join changes, then the seal.
One flow has no failing member and must complete; in the others a few members fail for
good, so ``dependency_failed`` propagates through the graph.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import pytest

import workflows
from tests.acceptance.harness import dispatching_to
from tests.acceptance.invariants import every_problem, flow_problems
from tests.acceptance.stack import Stack
from workflows.models import Event, Flow, FlowEdge, FlowMember, Run
from workflows.status import FlowStatus, RunStatus

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

FLOWS = 3
MEMBERS = 50
ROOTS = 3  # members without upstreams: they start as soon as they are added
WINDOW = 8  # a member's upstreams are among the WINDOW members before it: a deep graph
MOST_UPSTREAMS = 3
FAILING = 3  # members failing for good, in every flow but the first
FIRST_WAVE = MEMBERS // 2  # added before anything runs; the rest once some have started
STARTED_BEFORE_SECOND_WAVE = 4  # members of each flow
JOIN_CHANGES = 5  # set_join calls per flow, on members that may have started meanwhile
WORKERS = 3
PAUSE = [0.02, 0.2]  # seconds in each handler, where the chaos loop kills workers
SECONDS_BETWEEN_KILLS = (1.5, 3.0)
TIMEOUT = 150.0

MEMBER = "acceptance_flow_member"
FAILS = "acceptance_flow_member_fails"

Join = str | int


@dataclass(frozen=True)
class Planned:
    """One member as planned: the upstreams named when it is added (``after``) and those
    staged with ``add_dependency`` once every member exists (``later``: refused when it
    has started by then)."""

    name: str
    fails: bool
    after: tuple[str, ...]
    later: tuple[str, ...]
    join: Join
    # Named after a failing member with join "all": its join is never changed, so that
    # failure is sure to reach it.
    needs_failing: bool = False

    @property
    def workflow(self) -> str:
        return FAILS if self.fails else MEMBER

    @property
    def input(self) -> dict[str, Any]:
        return {"failures": 99} if self.fails else {"pause": PAUSE}


def random_join(rng: random.Random, after: int) -> Join:
    """``"all"``, ``"any"`` or a k the upstreams named at the start can meet alone (no k
    without upstreams: at least 1 of none is never met)."""
    join: Join = rng.choice(["all", "any", "k"] if after else ["all", "any"])
    return rng.randint(1, after) if join == "k" else join


def plan_flow(rng: random.Random, failing: int) -> list[Planned]:
    """A random DAG of MEMBERS members. Each failing member is named in the ``after`` of a
    later member with join ``"all"``, so its failure reaches at least that member."""
    names = [f"m{i:02d}" for i in range(MEMBERS)]
    upstreams: list[set[int]] = [set() for _ in names]
    for i in range(ROOTS, MEMBERS):
        window = range(max(0, i - WINDOW), i)
        upstreams[i] = set(rng.sample(window, rng.randint(1, min(MOST_UPSTREAMS, len(window)))))
    fails = set(rng.sample(range(ROOTS, MEMBERS - 1), failing))
    needs: dict[int, set[int]] = defaultdict(set)
    for f in fails:
        needs[rng.randrange(f + 1, MEMBERS)].add(f)
    plan = []
    for i, name in enumerate(names):
        ups = [names[j] for j in sorted(upstreams[i] - needs[i])]
        rng.shuffle(ups)
        split = rng.randint(1, len(ups)) if ups else 0
        after, later = ups[:split] + [names[f] for f in sorted(needs[i])], ups[split:]
        join = "all" if needs[i] else random_join(rng, len(after))
        plan.append(Planned(name, i in fails, tuple(after), tuple(later), join, bool(needs[i])))
    return plan


@dataclass
class Builder:
    """Builds the flows from pytest's process, giving the chaos loop its turn between calls."""

    stack: Stack
    rng: random.Random
    chaos: Callable[[], None]
    accepted_later: int = 0
    refused_later: int = 0
    join_changes: int = 0
    refused_join_changes: int = 0

    def turn(self) -> None:
        self.stack.processes.check_watched()
        self.chaos()

    def add(self, flow: Flow, member: Planned) -> None:
        self.turn()
        workflows.add_to_flow(
            flow,
            member.workflow,
            member.input,
            member=member.name,
            after=member.after,
            join=member.join,
        )

    def stage_later(self, flow: Flow, member: Planned, upstream: str) -> None:
        """Stage the edge against the revision just read: nothing but pytest changes the
        graph, so a member ending on a worker must not have moved it."""
        self.turn()
        revision = Flow.objects.values_list("revision", flat=True).get(pk=flow.pk)
        try:
            workflows.add_dependency(flow, upstream, member.name, expected_revision=revision)
        except workflows.InvalidFlowChange:
            assert member_status(flow, member.name) != RunStatus.BLOCKED
            self.refused_later += 1
        else:
            self.accepted_later += 1

    def change_join(self, flow: Flow, member: Planned) -> None:
        self.turn()
        try:
            workflows.set_join(flow, member.name, random_join(self.rng, len(member.after)))
        except workflows.InvalidFlowChange:
            assert member_status(flow, member.name) != RunStatus.BLOCKED
            self.refused_join_changes += 1
        else:
            self.join_changes += 1


def member_status(flow: Flow, name: str) -> str:
    return Run.objects.values_list("status", flat=True).get(flow=flow, flow_member__name=name)


def started_members(flow: Flow) -> int:
    return Event.objects.filter(run__flow=flow, type="run.started").count()


def test_flows_built_while_they_run_end_exactly_once_while_workers_are_killed(stack):
    """Three flows of 50 members (150 runs of two steps, or one failing step) on three
    workers, a worker killed in the middle of a step every few seconds. Every member
    runs once, starts only once its join is met, or is cancelled with
    ``dependency_failed`` once it cannot be; every sealed flow ends as its members did."""
    seed = int(os.environ.get("FLOW_CHAOS_SEED") or random.randrange(10**9))
    print(f"flow chaos seed {seed} (FLOW_CHAOS_SEED={seed} plans the same flows)")
    rng = random.Random(seed)
    plans = [plan_flow(rng, failing=0 if n == 0 else FAILING) for n in range(FLOWS)]
    cluster = stack.qcluster(workers=WORKERS)
    stack.sweeper()
    next_kill = time.monotonic() + rng.uniform(*SECONDS_BETWEEN_KILLS)

    def chaos() -> None:
        nonlocal next_kill
        if time.monotonic() >= next_kill and stack.kill_random_worker(cluster) is not None:
            next_kill = time.monotonic() + rng.uniform(*SECONDS_BETWEEN_KILLS)

    builder = Builder(stack, rng, chaos)
    with dispatching_to(stack.processes):
        flows = [workflows.create_flow(f"chaos-{n}") for n in range(FLOWS)]
        for i in range(FIRST_WAVE):
            for flow, plan in zip(flows, plans, strict=True):
                builder.add(flow, plan[i])
        stack.wait_for(
            f"{STARTED_BEFORE_SECOND_WAVE} members of each flow to start",
            lambda: all(started_members(f) >= STARTED_BEFORE_SECOND_WAVE for f in flows),
            timeout=TIMEOUT,
            on_poll=chaos,
        )
        for i in range(FIRST_WAVE, MEMBERS):
            for flow, plan in zip(flows, plans, strict=True):
                builder.add(flow, plan[i])
        later = [
            (f, m, up) for f, plan in zip(flows, plans, strict=True) for m in plan for up in m.later
        ]
        for flow, member, upstream in rng.sample(later, len(later)):
            builder.stage_later(flow, member, upstream)
        for flow, plan in zip(flows, plans, strict=True):
            changeable = [m for m in plan[ROOTS:] if not m.needs_failing]
            for member in rng.sample(changeable, JOIN_CHANGES):
                builder.change_join(flow, member)
        for flow in flows:
            workflows.seal_flow(flow)

    ended = (FlowStatus.COMPLETED, FlowStatus.FAILED)
    run_ids = list(Run.objects.filter(flow__in=flows).values_list("pk", flat=True))
    stack.wait_for(
        f"{FLOWS} sealed flows to end",
        lambda: (
            Flow.objects.filter(pk__in=[f.pk for f in flows], status__in=ended).count() == FLOWS
        ),
        timeout=TIMEOUT,
        run_ids=run_ids,
        on_poll=chaos,
    )

    runs = Run.objects.filter(flow__in=flows)
    started = FlowMember.objects.filter(flow__in=flows, run__events__type="run.started")
    print(
        f"kills {len(stack.kills)}, edges {FlowEdge.objects.filter(flow__in=flows).count()}, "
        f"later edges {builder.accepted_later} staged / {builder.refused_later} refused, "
        f"join changes {builder.join_changes} / {builder.refused_join_changes} refused, "
        f"members {dict(Counter(runs.values_list('status', flat=True)))}, started by join "
        f"{dict(Counter(started.values_list('join', flat=True)))}"
    )
    assert len(stack.kills) >= 3, f"the chaos loop killed only {stack.kills}"
    assert flow_problems([flow.pk for flow in flows]) == []
    assert every_problem(run_ids) == []
    assert stack.monitor.problems == []
    assert unexpected_endings(flows, plans) == {}
    clean, *failing = (Flow.objects.get(pk=flow.pk) for flow in flows)
    assert (clean.status, not_completed(clean)) == (FlowStatus.COMPLETED, {})
    assert [flow.status for flow in failing] == [FlowStatus.FAILED] * (FLOWS - 1)
    assert builder.accepted_later > 0
    for flow in flows[1:]:  # each failing member reaches at least one "all" downstream
        assert runs.filter(flow=flow, error__code="dependency_failed").exists()


def not_completed(flow: Flow) -> dict[str, tuple[str, Any]]:
    """The members of ``flow`` that did not complete: their status and error."""
    rows = Run.objects.filter(flow=flow).exclude(status=RunStatus.COMPLETED)
    return {
        name: (status, error)
        for name, status, error in rows.values_list("flow_member__name", "status", "error")
    }


def unexpected_endings(flows: list[Flow], plans: list[list[Planned]]) -> dict[str, tuple[str, Any]]:
    """Members that started yet did not end as planned, with their status and error:
    failing ones ``failed``, the others ``completed`` (those that never started are
    ``flow_problems``' concern)."""
    started = set(
        Event.objects.filter(run__flow__in=flows, type="run.started").values_list(
            "run_id", flat=True
        )
    )
    found = {}
    for flow, plan in zip(flows, plans, strict=True):
        rows: dict[str, tuple[UUID, str, Any]] = {
            name: (pk, status, error)
            for pk, name, status, error in Run.objects.filter(flow=flow).values_list(
                "pk", "flow_member__name", "status", "error"
            )
        }
        for member in plan:
            pk, status, error = rows[member.name]
            expected = RunStatus.FAILED if member.fails else RunStatus.COMPLETED
            if pk in started and status != expected:
                found[f"{flow.name}/{member.name}"] = (status, error)
    return found
