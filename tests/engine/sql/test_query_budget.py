"""Query budget: the price of a step is fixed, whatever the size of its run.

Counted with Django's query capture; BEGIN/COMMIT/SAVEPOINT statements are left out
because backends log them differently (SQLite logs ``BEGIN IMMEDIATE``, PostgreSQL's
driver begins implicitly). The numbers are documented in docs/architecture.md.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

import workflows
from tests.support.handlers import NOOP
from tests.support.runs import claimed
from workflows import FanOut, Task, Workflow
from workflows.engine import ITEM, claim, claim_step, complete_work
from workflows.engine.lease import LeaseBatch
from workflows.engine.outcomes import record_batch
from workflows.models import Event, FanOutItem, Step
from workflows.testing import run_pending
from workflows.workers.runner import run_attempt

pytestmark = pytest.mark.django_db


# On PostgreSQL a completion locks its run and makes its fenced update in one statement,
# and the claim of the next step inserts the transition's events in its own statement
# (data-modifying CTEs); SQLite runs them apart.
POSTGRESQL = connection.vendor == "postgresql"
# From claim to the next step being ready: claim (select, update, insert event) and
# completion (lock run, fenced update, read downstream rows, ready next, insert events).
UNCHAINED_STEP_QUERIES = 7 if POSTGRESQL else 8
# A worker chaining into the next step: completion and next claim in one transaction
# (lock run, fenced update, claim of the next step by run, name and status, insert events).
CHAINED_STEP_QUERIES = 2 if POSTGRESQL else 4
# The same when the next step needs graph evaluation (a condition, a join): its rows are
# read before it is claimed (a claim by key, whose events are inserted apart).
EVALUATED_STEP_QUERIES = 4 if POSTGRESQL else 5
# A batched fan-out worker recording a batch and chaining into the next, whatever the
# batch size: lock run, set-based fenced completion, counter, claim of the next batch,
# insert events.
CHAINED_BATCH_QUERIES = 5
# Claiming a batch: read the nudged item with its run, claim the batch, insert events.
BATCH_CLAIM_QUERIES = 3


def chain_of(length: int, *, transactional: bool = False) -> type[Workflow]:
    body = {f"s{i:03d}": Task(NOOP, transactional=transactional) for i in range(length)}
    name = f"budget_chain_{length}" + ("_transactional" if transactional else "")
    return type(f"Chain{length}", (Workflow,), {"__module__": __name__, "name": name, **body})


SHORT = chain_of(4)
LONG = chain_of(60)
SHORT_TRANSACTIONAL = chain_of(4, transactional=True)


def statements(captured: CaptureQueriesContext) -> list[str]:
    skipped = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK")
    return [q["sql"] for q in captured.captured_queries if not q["sql"].startswith(skipped)]


def unchained_cost(workflow: type[Workflow], position: int, history: int = 0) -> int:
    run = workflows.start_run(workflow)
    Event.objects.bulk_create(Event(run=run, type="noise") for _ in range(history))
    for name in list(workflow.nodes)[:position]:
        step = Step.objects.get(run=run, name=name)
        complete_work(claim_step(step.pk, "w"), None)
    step = Step.objects.get(run=run, name=list(workflow.nodes)[position])
    with CaptureQueriesContext(connection) as captured:
        complete_work(claim_step(step.pk, "w"), None)
    assert Step.objects.get(run=run, name=list(workflow.nodes)[position + 1]).status == "ready"
    return len(statements(captured))


def chained_cost(workflow: type[Workflow], position: int) -> int:
    run = workflows.start_run(workflow)
    lease = claimed(run, "s000", "w")
    for _ in range(position):
        lease = complete_work(lease, None, claim_next=True)
    with CaptureQueriesContext(connection) as captured:
        lease = complete_work(lease, None, claim_next=True)
    assert lease is not None
    return len(statements(captured))


def test_unchained_step_costs_a_fixed_number_of_queries():
    assert unchained_cost(SHORT, 1) == UNCHAINED_STEP_QUERIES
    assert unchained_cost(LONG, 1) == UNCHAINED_STEP_QUERIES
    assert unchained_cost(LONG, 40, history=500) == UNCHAINED_STEP_QUERIES


def test_chained_step_costs_a_fixed_number_of_queries():
    assert chained_cost(SHORT, 1) == CHAINED_STEP_QUERIES
    assert chained_cost(LONG, 30) == CHAINED_STEP_QUERIES


def test_a_successor_that_needs_evaluating_costs_one_read_more():
    """A condition on the next step (or a join) takes the general graph evaluation: the
    step's rows are read before it is claimed."""
    conditional = type(
        "Conditional",
        (Workflow,),
        {
            "__module__": __name__,
            "name": "budget_conditional",
            "s000": Task(NOOP),
            "s001": Task(NOOP, when=lambda ctx: True),
            "s002": Task(NOOP),
        },
    )
    assert chained_cost(conditional, 0) == EVALUATED_STEP_QUERIES
    assert chained_cost(conditional, 1) == CHAINED_STEP_QUERIES


def test_whole_runs_cost_linearly_in_steps():
    workflows.start_run(SHORT)
    with CaptureQueriesContext(connection) as short:
        run_pending()
    workflows.start_run(LONG)
    with CaptureQueriesContext(connection) as long:
        run_pending()
    per_extra_step = (len(statements(long)) - len(statements(short))) / (60 - 4)
    assert per_extra_step == CHAINED_STEP_QUERIES


def test_deciding_a_gate_costs_the_same_queries_whatever_the_run_size():
    from django.contrib.auth.models import User

    from workflows import Gate

    user = User.objects.create_user("budget-approver")

    def gated(length: int) -> type[Workflow]:
        body = {"gate": Gate(prompt="go?"), **{f"s{i:03d}": Task(NOOP) for i in range(length)}}
        return type(
            f"Gated{length}",
            (Workflow,),
            {"__module__": __name__, "name": f"budget_gated_{length}", **body},
        )

    def cost(workflow: type[Workflow]) -> int:
        run = workflows.start_run(workflow)
        gate = Step.objects.get(run=run, name="gate")
        Event.objects.bulk_create(Event(run=run, type="noise") for _ in range(200))
        with CaptureQueriesContext(connection) as captured:
            workflows.approve_gate(gate, user=user)
        return len(statements(captured))

    assert cost(gated(3)) == cost(gated(50))


def attempt_cost(workflow: type[Workflow]) -> int:
    """Statements of one whole attempt as a worker runs it: handler, completion, next claim."""
    run = workflows.start_run(workflow)
    lease = claimed(run, "s000", "w")
    with CaptureQueriesContext(connection) as captured:
        assert run_attempt(lease, chain=True) is not None
    return len(statements(captured))


def test_a_transactional_step_costs_what_a_plain_one_does():
    """Running the handler inside the completion's transaction adds no statement (only a
    savepoint, which is not counted)."""
    assert attempt_cost(SHORT) == CHAINED_STEP_QUERIES
    assert attempt_cost(SHORT_TRANSACTIONAL) == CHAINED_STEP_QUERIES


def batched_fanout(batch_size: int) -> type[Workflow]:
    node = FanOut(
        NOOP,
        items=lambda ctx: list(range(10 * batch_size)),
        max_parallel=batch_size,
        batch_size=batch_size,
    )
    name = f"budget_batches_{batch_size}"
    return type(
        f"Batches{batch_size}", (Workflow,), {"__module__": __name__, "name": name, "fan": node}
    )


BATCHES = {size: batched_fanout(size) for size in (2, 50)}


def batch_costs(batch_size: int) -> tuple[int, int]:
    """Statements of claiming a batch, and of recording it while claiming the next."""
    run = workflows.start_run(BATCHES[batch_size])
    first = FanOutItem.objects.filter(step__run=run, status="ready").order_by("index")[0]
    with CaptureQueriesContext(connection) as claimed:
        batch = claim(ITEM, first.pk, "w")
    assert isinstance(batch, LeaseBatch) and len(batch.leases) == batch_size
    with CaptureQueriesContext(connection) as recorded:
        following, lost = record_batch(
            batch, [(lease, None) for lease in batch.leases], [], claim_next=True
        )
    assert isinstance(following, LeaseBatch) and len(following.leases) == batch_size
    assert lost == []
    return len(statements(claimed)), len(statements(recorded))


def test_a_batch_of_items_costs_the_same_queries_whatever_its_size():
    assert batch_costs(2) == (BATCH_CLAIM_QUERIES, CHAINED_BATCH_QUERIES)
    assert batch_costs(50) == (BATCH_CLAIM_QUERIES, CHAINED_BATCH_QUERIES)


# Claiming a step: read it with its run, compare-and-set it, insert its event.
CLAIM_QUERIES = 3
# Under a concurrency key (its slots created by an earlier claim): the free slots read
# (locked) and one compare-and-set more.
CLAIM_WITH_SLOT_QUERIES = CLAIM_QUERIES + 2
# Under a rate limit: its bucket read (locked) and its starts written.
CLAIM_WITH_RATE_QUERIES = CLAIM_QUERIES + 2
# Ending an attempt that held a slot: the slot emptied, and the best unit held on its
# key looked for among steps and items.
SLOT_RELEASE_QUERIES = 3


def per_customer(ctx):
    return f"customer:{ctx.input['customer']}"


class Keyed(Workflow):
    name = "budget_keyed"
    work = Task(NOOP, concurrency_key=per_customer, max_concurrent=2)


class Throttled(Workflow):
    name = "budget_throttled"
    work = Task(NOOP, rate_limit="1000/s")


class Unlimited(Workflow):
    name = "budget_unlimited"
    work = Task(NOOP)


def claim_and_complete_costs(workflow: type[Workflow]) -> tuple[int, int]:
    """Statements of claiming a step (after a first one warmed the limit's rows), and of
    completing it."""
    warm = workflows.start_run(workflow, {"customer": 1})
    complete_work(claim_step(Step.objects.get(run=warm).pk, "w"), None)
    run = workflows.start_run(workflow, {"customer": 1})
    step_id = Step.objects.get(run=run).pk
    with CaptureQueriesContext(connection) as claimed:
        lease = claim_step(step_id, "w")
    with CaptureQueriesContext(connection) as completed:
        complete_work(lease, None)
    return len(statements(claimed)), len(statements(completed))


def test_limits_cost_a_fixed_number_of_queries_more_at_the_claim():
    plain_claim, plain_completion = claim_and_complete_costs(Unlimited)
    assert plain_claim == CLAIM_QUERIES
    keyed_claim, keyed_completion = claim_and_complete_costs(Keyed)
    assert keyed_claim == CLAIM_WITH_SLOT_QUERIES
    assert keyed_completion == plain_completion + SLOT_RELEASE_QUERIES
    throttled_claim, throttled_completion = claim_and_complete_costs(Throttled)
    assert throttled_claim == CLAIM_WITH_RATE_QUERIES
    assert throttled_completion == plain_completion


class KeyedChain(Workflow):
    name = "budget_keyed_chain"
    s000 = Task(NOOP, concurrency_key=per_customer, max_concurrent=2)
    s001 = Task(NOOP, concurrency_key=per_customer, max_concurrent=2)
    s002 = Task(NOOP, concurrency_key=per_customer, max_concurrent=2)
    s003 = Task(NOOP, concurrency_key=per_customer, max_concurrent=2)


def test_a_worker_chains_into_limited_work_at_a_fixed_price():
    # Graph evaluation instead of the one-statement claim, the slot handed back, and the
    # next slot taken in the same transaction.
    run = workflows.start_run(KeyedChain, {"customer": 1})
    lease = claimed(run, "s000", "w")
    lease = complete_work(lease, None, claim_next=True)
    with CaptureQueriesContext(connection) as captured:
        lease = complete_work(lease, None, claim_next=True)
    assert lease is not None and lease.step_name == "s002"
    assert len(statements(captured)) == (
        EVALUATED_STEP_QUERIES + SLOT_RELEASE_QUERIES + CLAIM_WITH_SLOT_QUERIES - CLAIM_QUERIES
    )


# Adding a flow member after two upstream members still running, whatever the flow's
# size: lock the flow, look the member up (idempotency), read both upstream members, lock
# their runs (their statuses decide the new member), bump the revision, insert the run,
# its steps, the member, its edges and the events.
FLOW_MEMBER_QUERIES = 11
# Staging an edge from a blocked member to another: lock the flow, read both members,
# check the edge is new, walk the graph for a cycle (one recursive statement however
# long the walk), lock both runs, bump the revision, insert the edge, read the
# downstream's upstream statuses (still waiting), insert the event.
FLOW_EDGE_QUERIES = 10


def flow_of(size: int) -> workflows.Flow:
    """A running root, then a chain of ``size - 1`` blocked members, each after the one
    before and the root: an edge into the chain's head walks the whole chain for a cycle."""
    flow = workflows.create_flow(f"budget_flow_{size}")
    workflows.add_to_flow(flow, SHORT, {}, member="m0000")
    workflows.add_to_flow(flow, SHORT, {}, member="m0001", after=["m0000"])
    for i in range(2, size):
        after = [f"m{i - 1:04d}", "m0000"]
        workflows.add_to_flow(flow, SHORT, {}, member=f"m{i:04d}", after=after)
    workflows.add_to_flow(flow, SHORT, {}, member="side", after=["m0000"])
    return flow


def flow_costs(size: int) -> tuple[int, int]:
    flow = flow_of(size)
    last = f"m{size - 1:04d}"
    with CaptureQueriesContext(connection) as added:
        run = workflows.add_to_flow(flow, SHORT, {}, member="new", after=[last, "m0000"])
    assert run.status == "blocked"
    with CaptureQueriesContext(connection) as staged:
        workflows.add_dependency(flow, "side", "m0001")
    return len(statements(added)), len(statements(staged))


def test_a_flow_member_and_an_edge_cost_the_same_queries_whatever_the_flow_size():
    assert flow_costs(10) == (FLOW_MEMBER_QUERIES, FLOW_EDGE_QUERIES)
    assert flow_costs(200) == (FLOW_MEMBER_QUERIES, FLOW_EDGE_QUERIES)
