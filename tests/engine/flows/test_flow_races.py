"""Flows under concurrency, with real connections committing for real.

Each thread of :func:`tests.support.threads.run_concurrently` has its own database connection
and starts at a barrier. On PostgreSQL the transitions interleave, and a deadlock would
surface as its "deadlock detected" error in one thread (or as the test's thread
timeout), so every race asserts that no thread raised; on SQLite writers take turns
(``BEGIN IMMEDIATE``), and the same races check the outcome of serialised writers. The
races are repeated, a new flow each round, to meet more interleavings:

- two writers staging edges against the same revision: one wins, the other is told the
  graph moved; no edge is lost or doubled;
- many upstream members of one join ending at once: the member starts exactly once, and
  a k-of-n join fires once;
- an upstream ending while an edge from it is being staged: the downstream member is
  decided against committed state, never left blocked with its join satisfied and never
  started early;
- upstream members failing at once whose cancellations meet further downstream, a
  failure meeting a verb that stages an edge between members it must cancel, and
  members taking places (``max_concurrent_runs``) freed by each other's upstreams: all
  finish, none deadlocks;
- an upstream ending while another transaction holds its downstream member: its end
  commits without waiting, and the member is decided right after.
"""

from __future__ import annotations

import threading
import time
from functools import partial
from typing import Any
from unittest import mock

import pytest
from django.db import connections, transaction

import workflows
from tests.support.database import is_sqlite
from tests.support.flows import add, status
from tests.support.threads import THREAD_TIMEOUT_SECONDS, eventually
from workflows import PermanentError, Retry, Task, Workflow
from workflows.engine import claim_step, complete_work, fail_attempt
from workflows.engine.lease import Lease
from workflows.engine.sql.connection import engine_alias
from workflows.engine.sql.locks import lock_run
from workflows.errors import StaleRevision
from workflows.models import Event, Flow, FlowEdge, Run, Step
from workflows.status import RunStatus, StepStatus

pytestmark = pytest.mark.django_db(transaction=True)

INTERLEAVING = "SQLite serialises writers (BEGIN IMMEDIATE): no two transitions interleave"
ROUNDS = 8


class OnePlaceA(Workflow):
    name = "flow_races_one_place_a"
    max_concurrent_runs = 1
    work = Task("tests.support.handlers.noop", retry=Retry(max_attempts=1))


class OnePlaceB(Workflow):
    name = "flow_races_one_place_b"
    max_concurrent_runs = 1
    work = Task("tests.support.handlers.noop", retry=Retry(max_attempts=1))


def claimed(run: Run) -> Lease:
    """The lease of the member's one step, claimed (committed) before the race."""
    return claim_step(Step.objects.get(run=run, status=StepStatus.READY).pk, f"w-{run.pk}")


def complete(lease: Lease) -> None:
    complete_work(lease, "done")


def fail(lease: Lease) -> None:
    fail_attempt(lease, PermanentError("failed on purpose"))


def no_errors(results: list[Any]) -> list[Any]:
    errors = [result for result in results if isinstance(result, BaseException)]
    assert not errors, errors
    return results


def closing_after(call: Any) -> Any:
    """``call`` for a thread of its own, which closes its connections once it is done."""

    def run() -> None:
        try:
            call()
        finally:
            connections.close_all()

    return run


def starts(run: Run) -> int:
    """How many times the run started, and how many times its root step was entered."""
    started = Event.objects.filter(run=run, type="run.started").count()
    entered = Event.objects.filter(run=run, type="step.ready").count()
    assert started == entered
    return started


def test_two_writers_staging_against_one_revision_one_wins(concurrently):
    for round_ in range(ROUNDS):
        flow = workflows.create_flow(f"edges-{round_}")
        add(flow, "root")
        for name in ("x", "y", "down"):
            add(flow, name, after=("root",))
        seen = Flow.objects.get(pk=flow.pk).revision
        results = concurrently(
            partial(workflows.add_dependency, flow, "x", "down", expected_revision=seen),
            partial(workflows.add_dependency, flow, "y", "down", expected_revision=seen),
        )
        stale = [result for result in results if isinstance(result, StaleRevision)]
        won = [result for result in results if not isinstance(result, BaseException)]
        assert won == [seen + 1], results
        assert len(stale) == 1, results
        assert stale[0].details["revision"] == seen + 1
        upstreams = set(
            FlowEdge.objects.filter(downstream__name="down", flow=flow).values_list(
                "upstream__name", flat=True
            )
        )
        winner = "x" if isinstance(results[1], StaleRevision) else "y"
        assert upstreams == {"root", winner}
        assert Flow.objects.get(pk=flow.pk).revision == seen + 1
        staged = Event.objects.filter(flow=flow, type="flow.edge_added", payload__revision=seen + 1)
        assert staged.count() == 1


def test_two_writers_staging_the_same_edge_write_it_once(concurrently):
    for round_ in range(ROUNDS):
        flow = workflows.create_flow(f"same-edge-{round_}")
        add(flow, "root")
        add(flow, "x", after=("root",))
        add(flow, "down", after=("root",))
        seen = Flow.objects.get(pk=flow.pk).revision
        stage = partial(workflows.add_dependency, flow, "x", "down")
        assert no_errors(concurrently(stage, stage)) == [seen + 1, seen + 1]
        assert FlowEdge.objects.filter(flow=flow, upstream__name="x").count() == 1
        assert (
            Event.objects.filter(flow=flow, type="flow.edge_added", payload__upstream="x").count()
            == 1
        )


def test_upstreams_completing_at_once_start_an_all_member_once(concurrently):
    for round_ in range(ROUNDS):
        flow = workflows.create_flow(f"fan-in-{round_}")
        upstreams = [add(flow, f"u{i}") for i in range(8)]
        down = add(flow, "down", after=tuple(f"u{i}" for i in range(8)))
        leases = [claimed(run) for run in upstreams]
        no_errors(concurrently(*(partial(complete, lease) for lease in leases)))
        assert status(down) == RunStatus.RUNNING, round_
        assert starts(down) == 1
        assert Event.objects.filter(run=down, type="flow.member_unblocked").count() == 1


def test_a_k_join_fires_once_at_the_kth_completion(concurrently):
    for round_ in range(ROUNDS):
        flow = workflows.create_flow(f"k-of-n-{round_}")
        upstreams = [add(flow, f"u{i}") for i in range(7)]
        down = add(flow, "down", after=tuple(f"u{i}" for i in range(7)), join=3)
        leases = [claimed(run) for run in upstreams]
        complete(leases[0])
        complete(leases[1])
        assert status(down) == RunStatus.BLOCKED  # two of three
        no_errors(concurrently(*(partial(complete, lease) for lease in leases[2:])))
        assert status(down) == RunStatus.RUNNING, round_
        assert starts(down) == 1


def test_a_k_join_fires_once_among_failures(concurrently):
    """Completions and failures at once: two of four complete, so a 2-of-4 join fires,
    once; a 3-of-4 join beside it can no longer be met once the flow is sealed."""
    for round_ in range(ROUNDS):
        flow = workflows.create_flow(f"k-mixed-{round_}")
        upstreams = [add(flow, f"u{i}") for i in range(4)]
        names = tuple(f"u{i}" for i in range(4))
        two = add(flow, "two", after=names, join=2)
        three = add(flow, "three", after=names, join=3)
        leases = [claimed(run) for run in upstreams]
        no_errors(
            concurrently(
                partial(complete, leases[0]),
                partial(fail, leases[1]),
                partial(complete, leases[2]),
                partial(fail, leases[3]),
            )
        )
        assert status(two) == RunStatus.RUNNING
        assert starts(two) == 1
        assert status(three) == RunStatus.BLOCKED  # the open flow may still add upstreams
        workflows.seal_flow(flow)
        assert status(three) == RunStatus.CANCELLED
        assert starts(three) == 0


def test_an_upstream_ending_while_an_edge_from_it_is_staged(concurrently):
    """``u`` completes while edges ``u → any_of`` and ``u → all_of`` are staged and a
    new member ``late`` is added after ``u``. ``u``'s end also unblocks ``w``, its
    downstream member from the start (the flow's history gets an event). Whatever the
    order: ``any_of`` and ``late`` run (``u`` completed), ``all_of`` stays blocked
    (``hold`` has not completed) and starts once ``hold`` does."""
    for round_ in range(ROUNDS * 2):
        flow = workflows.create_flow(f"stage-vs-end-{round_}")
        hold = add(flow, "hold")
        u = add(flow, "u")
        w = add(flow, "w", after=("u",))
        any_of = add(flow, "any_of", after=("hold",), join="any")
        all_of = add(flow, "all_of", after=("hold",))
        hold_lease, u_lease = claimed(hold), claimed(u)
        results = concurrently(
            partial(complete, u_lease),
            partial(workflows.add_dependency, flow, "u", "any_of"),
            partial(workflows.add_dependency, flow, "u", "all_of"),
            partial(add, flow, "late", ("u",)),
        )
        late = no_errors(results)[3]
        assert status(w) == RunStatus.RUNNING
        assert status(any_of) == RunStatus.RUNNING, round_
        assert status(late) == RunStatus.RUNNING, round_
        assert status(all_of) == RunStatus.BLOCKED, round_
        assert starts(all_of) == 0
        complete(hold_lease)
        assert status(all_of) == RunStatus.RUNNING
        assert [starts(run) for run in (w, any_of, late, all_of)] == [1, 1, 1, 1]


def test_an_upstream_failing_while_an_edge_from_it_is_staged(concurrently):
    """The failing twin: the staged edge sees ``u`` failed (the ``all`` member is
    cancelled at once) or ``u``'s end sees the edge; either way the member ends
    cancelled, and an ``any`` member with ``hold`` pending waits."""
    for round_ in range(ROUNDS):
        flow = workflows.create_flow(f"stage-vs-failure-{round_}")
        hold = add(flow, "hold")
        u = add(flow, "u")
        any_of = add(flow, "any_of", after=("hold",), join="any")
        all_of = add(flow, "all_of", after=("hold",))
        hold_lease, u_lease = claimed(hold), claimed(u)
        no_errors(
            concurrently(
                partial(fail, u_lease),
                partial(workflows.add_dependency, flow, "u", "any_of"),
                partial(workflows.add_dependency, flow, "u", "all_of"),
            )
        )
        assert status(all_of) == RunStatus.CANCELLED, round_
        assert Run.objects.get(pk=all_of.pk).error["upstream"] == "u"
        assert status(any_of) == RunStatus.BLOCKED, round_
        complete(hold_lease)
        assert status(any_of) == RunStatus.RUNNING
        assert starts(any_of) == 1


def test_failures_whose_cancellations_meet_downstream_do_not_deadlock(concurrently):
    """``x`` and ``y`` fail at once. ``x``'s end cancels ``d1`` and, through it, ``e``,
    then turns to ``d3``; ``y``'s end cancels ``d3`` and, through it, turns to ``e``.
    Waiting for each other's downstream locks, the two would deadlock."""
    for round_ in range(ROUNDS * 2):
        flow = workflows.create_flow(f"cascades-{round_}")
        x, y = add(flow, "x"), add(flow, "y")
        d1 = add(flow, "d1", after=("x",))
        d3 = add(flow, "d3", after=("x", "y"))
        e = add(flow, "e", after=("d1", "d3"))
        x_lease, y_lease = claimed(x), claimed(y)
        no_errors(concurrently(partial(fail, x_lease), partial(fail, y_lease)))
        assert [status(run) for run in (d1, d3, e)] == [RunStatus.CANCELLED] * 3, round_


def test_a_failure_meeting_a_verb_that_stages_an_edge_does_not_deadlock(concurrently):
    """``x`` fails, cancelling its blocked downstream members ``d`` then ``u``, while an
    edge ``u → d`` is staged, which locks ``u`` then ``d``."""
    for round_ in range(ROUNDS * 2):
        flow = workflows.create_flow(f"verb-vs-failure-{round_}")
        x = add(flow, "x")
        d = add(flow, "d", after=("x",))
        u = add(flow, "u", after=("x",))
        x_lease = claimed(x)
        results = concurrently(
            partial(fail, x_lease), partial(workflows.add_dependency, flow, "u", "d")
        )
        # Staged after d was cancelled, the edge is refused (d has ended); else it was
        # staged first and d is cancelled regardless.
        assert not isinstance(results[0], BaseException), results
        if isinstance(results[1], BaseException):
            assert isinstance(results[1], workflows.InvalidFlowChange), results
        assert [status(run) for run in (d, u)] == [RunStatus.CANCELLED] * 2, round_


def test_members_taking_places_freed_by_each_others_upstreams_do_not_deadlock(concurrently):
    """``x`` holds the one place of workflow A, ``y`` the one of B; ``x``'s downstream
    member runs B, ``y``'s runs A. Ending at once, each end frees its place (locking its
    slot) and its downstream member needs a place of the other workflow: taken in the
    ending transitions, each would wait for the slot the other holds."""
    for round_ in range(ROUNDS):
        flow = workflows.create_flow(f"places-{round_}")
        x = workflows.add_to_flow(flow, OnePlaceA, {}, member="x")
        y = workflows.add_to_flow(flow, OnePlaceB, {}, member="y")
        after_x = workflows.add_to_flow(flow, OnePlaceB, {}, member="after_x", after=["x"])
        after_y = workflows.add_to_flow(flow, OnePlaceA, {}, member="after_y", after=["y"])
        x_lease, y_lease = claimed(x), claimed(y)
        no_errors(concurrently(partial(complete, x_lease), partial(complete, y_lease)))
        assert [status(after_x), status(after_y)] == [RunStatus.RUNNING] * 2, round_
        for lease in (claimed(after_x), claimed(after_y)):
            complete(lease)  # their places free for the next round


def test_a_member_held_elsewhere_is_decided_after_the_upstreams_commit():
    """The upstream's end does not wait for a downstream member another transaction
    holds: it commits, and the member is decided right after, once it is free."""
    if is_sqlite():
        pytest.skip(INTERLEAVING)
    flow = workflows.create_flow("held")
    x = add(flow, "x")
    down = add(flow, "down", after=("x",))
    lease = claimed(x)
    opened, release = threading.Event(), threading.Event()

    def hold_down() -> None:
        try:
            with transaction.atomic(using=engine_alias()):
                lock_run(down.pk)
                opened.set()
                assert release.wait(THREAD_TIMEOUT_SECONDS)
        finally:
            opened.set()
            connections.close_all()

    holder, ender = (
        threading.Thread(target=hold_down),
        threading.Thread(target=closing_after(partial(complete, lease))),
    )
    holder.start()
    assert opened.wait(THREAD_TIMEOUT_SECONDS)
    try:
        ender.start()
        # x's end commits while down is held (its decision, after commit, waits).
        give_up_at = time.monotonic() + THREAD_TIMEOUT_SECONDS
        while status(x) != RunStatus.COMPLETED and time.monotonic() < give_up_at:
            time.sleep(0.02)
        assert status(x) == RunStatus.COMPLETED, "x's end waited for its downstream member"
        assert status(down) == RunStatus.BLOCKED
    finally:
        release.set()
        holder.join(THREAD_TIMEOUT_SECONDS)
        ender.join(THREAD_TIMEOUT_SECONDS)
    assert not ender.is_alive()
    assert status(down) == RunStatus.RUNNING
    assert starts(down) == 1


def test_a_member_decided_after_a_join_change_is_decided_under_the_new_join():
    """Found by the flow chaos test on PostgreSQL: x ended while a join change of its
    downstream member (``any`` to ``at least 2``) held the member's run. The decision
    left for after x's commit read the member, then waited for its run: it decided under
    the join it had read, ``any``, and started the member with one upstream of two
    completed. The member is read once its run is held, so under ``at least 2``."""
    if is_sqlite():
        pytest.skip(INTERLEAVING)
    from workflows.engine.flows import edges

    flow = workflows.create_flow("rejoined")
    x, y = add(flow, "x"), add(flow, "y")
    down = add(flow, "down", after=("x", "y"), join="any")
    lease = claimed(x)
    opened, release = threading.Event(), threading.Event()
    real_decide = edges.decide

    def decide_when_released(*args: Any, **kwargs: Any) -> Any:
        opened.set()
        assert release.wait(THREAD_TIMEOUT_SECONDS)
        return real_decide(*args, **kwargs)

    def set_join() -> None:
        try:
            workflows.set_join(flow, "down", 2)
        finally:
            opened.set()
            connections.close_all()

    def waiting_for_a_lock() -> bool:
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
            return cursor.fetchone()[0] > 0

    joiner, ender = (
        threading.Thread(target=set_join),
        threading.Thread(target=closing_after(partial(complete, lease))),
    )
    with mock.patch.object(edges, "decide", decide_when_released):
        joiner.start()
        assert opened.wait(THREAD_TIMEOUT_SECONDS)  # the join is written, not committed
        try:
            ender.start()
            # x's end commits; its decision of "down" then waits for down's run.
            assert eventually(lambda: status(x) == RunStatus.COMPLETED)
            assert eventually(waiting_for_a_lock)
        finally:
            release.set()
            joiner.join(THREAD_TIMEOUT_SECONDS)
            ender.join(THREAD_TIMEOUT_SECONDS)
    assert not ender.is_alive() and not joiner.is_alive()
    assert status(down) == RunStatus.BLOCKED, "started under the join it replaced"
    assert starts(down) == 0
    complete(claimed(y))
    assert status(down) == RunStatus.RUNNING
    assert starts(down) == 1
