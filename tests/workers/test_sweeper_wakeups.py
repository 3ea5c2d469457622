"""The sweeper is woken by commits: with its poll and recovery intervals at a minute, a
hook and a webhook still go out after the commit that made them due.

The sweeper runs in a thread; the waits below end as soon as what is awaited arrived and
are bounded below the sweeper's intervals, so an arrival proves the wake-up (no timing
is asserted).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

import workflows
from tests.support.threads import eventually
from tests.support.webhook_receiver import Receiver
from workflows import Gate, Workflow, hooks
from workflows.testing import sweeper_running
from workflows.webhooks import services as webhook_services

pytestmark = pytest.mark.django_db(transaction=True)

INTERVAL = timedelta(seconds=60)
# Less than INTERVAL: what arrives within it was not found by a poll.
ARRIVAL_BOUND = 30


class Held(Workflow):
    name = "sweeper_wakeups_held"
    review = Gate(prompt="go?")


@pytest.fixture
def slow_polls(settings: Any) -> None:
    settings.WORKFLOWS = {
        **settings.WORKFLOWS,
        "TIMER_POLL_INTERVAL": INTERVAL,
        "RECOVERY_INTERVAL": INTERVAL,
        "REPAIR_INTERVAL": INTERVAL,
    }


def arrives(found: Callable[[], bool]) -> bool:
    return eventually(found, timeout=ARRIVAL_BOUND)


def sent_for(receiver: Receiver) -> set[str]:
    """The runs ``receiver`` was sent an event of."""
    return {request.json["data"]["run_id"] for request in receiver.requests}


@pytest.fixture
def started() -> Iterator[set[UUID]]:
    """The runs whose run_started hook was sent."""
    runs: set[UUID] = set()

    def receive(sender: Any, run_id: UUID, **arguments: Any) -> None:
        runs.add(run_id)

    hooks.run_started.connect(receive)
    yield runs
    hooks.run_started.disconnect(receive)


def test_a_hook_goes_out_right_after_its_commit(slow_polls, started):
    with sweeper_running():
        # The first pass, which runs at once, delivers this one: the sweeper now waits.
        first = workflows.start_run(Held)
        assert arrives(lambda: first.pk in started)
        second = workflows.start_run(Held)
        assert arrives(lambda: second.pk in started)


def test_a_webhook_is_sent_right_after_its_delivery_is_recorded(slow_polls, started):
    with Receiver() as receiver, sweeper_running():
        first = workflows.start_run(Held)
        assert arrives(lambda: first.pk in started)
        endpoint = webhook_services.create_endpoint(url=receiver.url, event_types=["run.started"])
        receiver.secret = endpoint.secret
        run = workflows.start_run(Held)
        assert arrives(lambda: str(run.pk) in sent_for(receiver))


def test_an_enabled_endpoint_alone_keeps_the_sweeper_woken_by_commits(slow_polls):
    # No hook receiver: the enabled endpoint is what makes event delivery awaited
    # (workflows.workers.scanners.events_awaited), looked at by the sweeper's first pass.
    with Receiver() as receiver:
        endpoint = webhook_services.create_endpoint(url=receiver.url, event_types=["run.started"])
        receiver.secret = endpoint.secret
        with sweeper_running():
            first = workflows.start_run(Held)
            assert arrives(lambda: str(first.pk) in sent_for(receiver))
            second = workflows.start_run(Held)
            assert arrives(lambda: str(second.pk) in sent_for(receiver))
