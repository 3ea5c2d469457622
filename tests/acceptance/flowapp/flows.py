"""Workflows of the acceptance tests, discovered in pytest and in every worker process.

Leases are seconds long so that reclaims happen within a test; every task declares its
own timeout and retry policy, so pytest (default settings) and the workers (acceptance
settings) agree on them.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from tests.acceptance.flowapp.handlers import stall
from workflows import FanOut, Retry, Sleep, Task, Workflow
from workflows.context import Context

HANDLERS = "tests.acceptance.flowapp.handlers"
LEASE = timedelta(seconds=2)
HOLD_TIMEOUT = timedelta(seconds=5)
# Enough attempts that a step does not run out of them under the chaos test's kills.
PATIENT = Retry(max_attempts=6, initial_interval=timedelta(milliseconds=200), backoff=1.5)
# One attempt: under concurrency any error (a lock error included) fails the run visibly
# instead of being retried away.
ONCE = Retry(max_attempts=1)


def task(handler: str = "work", *after: str, retry: Retry = PATIENT, **options: Any) -> Task:
    """A task of ``handlers.<handler>`` with the short lease; ``after`` as in the DSL."""
    return Task(
        f"{HANDLERS}.{handler}",
        timeout=options.pop("timeout", LEASE),
        retry=retry,
        after=list(after) if after else None,
        **options,
    )


def wake_at(ctx: Context) -> datetime:
    return datetime.fromisoformat(ctx.input["wake_at"])


class Hold(Workflow):
    """A step whose first attempt blocks until released (or its worker is killed).

    Its timeout is longer than the others' lease: a held attempt whose worker lives past
    the timeout is failed by that worker's watchdog (class ``timeout``), so the tests
    that kill or freeze the worker must do it within the timeout, from another process.
    """

    name = "acceptance_hold"

    hold = task("hold", retry=Retry(max_attempts=3), timeout=HOLD_TIMEOUT)
    then = task()


class Reporting(Workflow):
    """A step that logs, reports progress and patches its summary before it holds, as
    :class:`Hold`'s step does: the frames of a killed attempt stay, the next one's follow."""

    name = "acceptance_telemetry"

    report = task("reports_then_holds", retry=Retry(max_attempts=3), timeout=HOLD_TIMEOUT)


class Overrun(Workflow):
    """A step whose first attempt blocks past its timeout while its worker lives."""

    name = "acceptance_overrun"

    slow = task(
        "hold",
        timeout=timedelta(seconds=1),
        retry=Retry(
            max_attempts=2,
            initial_interval=timedelta(milliseconds=100),
            retry_on={"transient", "timeout"},
        ),
    )


class Die(Workflow):
    """A step that kills its worker on every attempt; the step after it never runs."""

    name = "acceptance_die"

    die = task(
        "die",
        timeout=timedelta(seconds=1),
        retry=Retry(max_attempts=3, initial_interval=timedelta(milliseconds=100)),
    )
    never = task()


class Diamond(Workflow):
    """A step, two parallel branches, their join and a last step."""

    name = "acceptance_diamond"

    first = task()
    left = task("work", "first")
    right = task("work", "first")
    join = task("work", "left", "right")
    last = task()


class Mixed(Workflow):
    """Parallel branches, a join, a short sleep and a task that fails once, in sequence."""

    name = "acceptance_mixed"

    prepare = task()
    left = task("work", "prepare")
    right = task("work", "prepare")
    join = task("work", "left", "right")
    nap = Sleep(timedelta(milliseconds=500))
    flaky = task("flaky")
    finish = task()


class Timers(Workflow):
    """A sleep until ``input["wake_at"]`` beside a task whose retry timer is pending."""

    name = "acceptance_timers"

    before = task()
    nap = Sleep(until=wake_at, after=["before"])
    flaky = task(
        "flaky", "before", retry=Retry(max_attempts=2, initial_interval=timedelta(seconds=1))
    )
    after = task("work", "nap", "flaky")


class Grid(Workflow):
    """A root, four parallel steps, a join, two parallel steps and a final join."""

    name = "acceptance_grid"

    root = task("count", retry=ONCE)
    a = task("count", "root", retry=ONCE)
    b = task("count", "root", retry=ONCE)
    c = task("count", "root", retry=ONCE)
    d = task("count", "root", retry=ONCE)
    mid = task("count", "a", "b", "c", "d", retry=ONCE)
    e = task("count", "mid", retry=ONCE)
    f = task("count", "mid", retry=ONCE)
    end = task("count", "e", "f", retry=ONCE)


class Stall(Workflow):
    """A step whose ``when=`` condition stalls inside the transition that releases it."""

    name = "acceptance_stall"

    first = task()
    second = task(when=stall)


class Nap(Workflow):
    """Nothing but a sleep until ``input["wake_at"]``: done when its timer fires."""

    name = "acceptance_nap"

    nap = Sleep(until=wake_at)


class Ledger(Workflow):
    """A transactional step writing the host's row, then an ordinary step."""

    name = "acceptance_ledger"

    book = task("ledger", transactional=True)
    then = task()


def numbered(ctx: Context) -> list[int]:
    return list(range(ctx.input["items"]))


class Batches(Workflow):
    """A batched fan-out (four items per transaction, four in hand), then a task.

    ``max_parallel`` equals ``batch_size``: at most four items are in hand, claimed in
    item order; two workers may split the first four between them. ``input["die_on"]``
    names items whose first attempt kills its worker, in the middle of its batch.
    """

    name = "acceptance_batches"

    fan = FanOut(
        f"{HANDLERS}.batch_item",
        items=numbered,
        max_parallel=4,
        batch_size=4,
        timeout=LEASE,
        retry=Retry(max_attempts=3, initial_interval=timedelta(milliseconds=200)),
    )
    then = task()


class LimitedRuns(Workflow):
    """At most three runs at once (``max_concurrent_runs``); the others wait queued."""

    name = "acceptance_limited_runs"
    max_concurrent_runs = 3

    first = task()
    second = task("work", "first")


class FlowMemberWork(Workflow):
    """A flow member of the flow chaos test: two steps in sequence, each pausing inside
    its handler (where the chaos loop kills workers)."""

    name = "acceptance_flow_member"

    first = task()
    second = task()


class FlowMemberFails(Workflow):
    """A flow member that fails for good (``input["failures"]`` above its attempts), so
    ``dependency_failed`` propagates to the members waiting for it."""

    name = "acceptance_flow_member_fails"

    fail = task("flaky", retry=Retry(max_attempts=2, initial_interval=timedelta(milliseconds=100)))


class Awaiting(Workflow):
    """A handler that awaits signal ``mapping`` mid-step, then outputs how it resumed."""

    name = "acceptance_awaiting"

    ask = task("await_mapping", awaits=["mapping"])
