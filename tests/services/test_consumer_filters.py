"""Event consumers with a filter (``create_consumer(name, workflows=, kinds=)``): they
read only the events of those workflows' runs and of those types, their lag counts only
them, acknowledging moves them past what they do not read, and a bad filter is refused
naming what is wrong. Runs on SQLite and on PostgreSQL (``DATABASE_URL``)."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connections

import workflows
from tests.support.threads import THREAD_TIMEOUT_SECONDS
from workflows.errors import InvalidInput
from workflows.models import Event, EventConsumer, Run
from workflows.queries.consumers import EventFilter, consumer_lag, consumer_lags


def _run(workflow: str = "billing") -> Run:
    return Run.objects.create(workflow_name=workflow, workflow_version=1, snapshot={})


def _event(run: Run | None, type: str, **payload: object) -> int:
    return Event.objects.create(run=run, type=type, payload=payload).pk


def _read(name: str, limit: int = 100) -> list[int]:
    return [event.id for event in workflows.consume(name, limit)]


def _lag(name: str) -> int:
    found = consumer_lag(name)
    assert found is not None
    return found.lag


@pytest.mark.django_db
class TestRefusals:
    @pytest.mark.parametrize(
        ("workflows_", "kinds", "field", "words"),
        [
            (["billing", " "], (), "workflows", "blank"),
            ([""], (), "workflows", "blank"),
            (["x" * 201], (), "workflows", "longer than 200"),
            ("billing", (), "workflows", "list of names"),
            ([7], (), "workflows", "not a string"),
            ((), ["run.completed", "run.finished"], "kinds", "'run.finished' is no event type"),
            ((), "run.completed", "kinds", "list of names"),
            ((), ["step.completed"] * 101, "kinds", "at most 100"),
        ],
    )
    def test_a_bad_filter_is_refused_naming_the_problem(self, workflows_, kinds, field, words):
        with pytest.raises(InvalidInput) as refused:
            workflows.create_consumer("c", workflows=workflows_, kinds=kinds)
        assert refused.value.details["field"] == field and words in refused.value.message
        assert not EventConsumer.objects.exists()

    def test_creating_a_name_again_with_another_filter_is_refused(self):
        workflows.create_consumer("c", kinds=["run.completed"])
        with pytest.raises(InvalidInput) as refused:
            workflows.create_consumer("c", kinds=["run.failed"])
        assert refused.value.details["field"] == "consumer"
        assert "another filter" in refused.value.message
        with pytest.raises(InvalidInput):
            workflows.create_consumer("c")
        assert EventConsumer.objects.get(name="c").event_types == ["run.completed"]

    def test_creating_again_with_the_same_filter_in_any_order_is_a_repeat(self):
        first = workflows.create_consumer("c", kinds=["run.failed", "run.completed"])
        again = workflows.create_consumer("c", kinds=["run.completed", "run.failed", "run.failed"])
        assert first.created and not again.created
        assert again.kinds == ("run.completed", "run.failed")


@pytest.mark.django_db
class TestFilteredReads:
    def test_reads_only_the_kinds_and_workflows_it_names(self):
        billing, shipping = _run("billing"), _run("shipping")
        wanted = [
            _event(billing, "run.completed"),
            _event(billing, "run.failed"),
        ]
        _event(billing, "step.completed")
        _event(shipping, "run.completed")
        _event(None, "schedule.fired", workflow="shipping")
        workflows.create_consumer(
            "done", workflows=["billing"], kinds=["run.completed", "run.failed"]
        )
        assert _read("done") == wanted
        assert _lag("done") == 2

    def test_a_workflow_filter_reads_the_schedule_events_naming_it(self):
        skipped = _event(None, "schedule.skipped", workflow="billing")
        _event(None, "schedule.skipped", workflow="shipping")
        ran = _event(_run("billing"), "step.completed")
        workflows.create_consumer("billing", workflows=["billing"])
        assert _read("billing") == [skipped, ran]
        assert _lag("billing") == 2

    def test_ack_moves_past_the_events_it_does_not_read(self):
        run = _run()
        first = _event(run, "run.completed")
        for _ in range(5):
            _event(run, "step.completed")
        second = _event(run, "run.completed")
        _event(run, "step.completed")
        workflows.create_consumer("done", kinds=["run.completed"])
        events = workflows.consume("done", limit=1)
        assert [event.id for event in events] == [first]
        workflows.ack("done", events[0].cursor)
        assert _lag("done") == 1
        events = workflows.consume("done")
        assert [event.id for event in events] == [second]
        done = workflows.ack("done", events[0].cursor)
        assert done.moved and EventConsumer.objects.get(name="done").position_id == second
        assert _lag("done") == 0 and _read("done") == []

    def test_a_consumer_that_reads_nothing_has_no_lag_and_does_not_stall(self):
        run = _run()
        workflows.create_consumer("failures", kinds=["run.failed"])
        workflows.create_consumer("everything")
        for _ in range(20):
            _event(run, "step.completed")
        assert _read("failures") == [] and _lag("failures") == 0
        assert _lag("everything") == 20
        # Nothing it reads came: it waits no longer than asked and still sees the next.
        assert workflows.consume("failures", wait=0.05) == []
        failed = _event(run, "run.failed")
        assert _read("failures") == [failed] and _lag("failures") == 1

    def test_an_unfiltered_consumer_reads_everything_as_before(self):
        ids = [_event(_run(), "step.completed"), _event(None, "flow.created")]
        workflows.create_consumer("all")
        assert _read("all") == ids and _lag("all") == 2
        assert consumer_lag("all").event_filter == EventFilter()  # type: ignore[union-attr]


@pytest.mark.django_db(transaction=True)
def test_a_waiting_filtered_consumer_returns_on_its_event_not_on_the_others():
    """A thread commits events the consumer does not read, one at a time, then one it
    reads: the wait goes on through the others (each wakes it, it finds nothing) and
    returns the one it reads, its lag never counting the others."""
    run = _run()
    workflows.create_consumer("failures", kinds=["run.failed"])

    def commit_later() -> None:
        try:
            for _ in range(5):
                time.sleep(0.05)
                _event(run, "step.completed")
            _event(run, "run.failed")
        finally:
            connections.close_all()

    writer = threading.Thread(target=commit_later)
    writer.start()
    try:
        events = workflows.consume("failures", wait=THREAD_TIMEOUT_SECONDS)
    finally:
        writer.join(THREAD_TIMEOUT_SECONDS)
    assert [event.type for event in events] == ["run.failed"]
    assert _lag("failures") == 1
    workflows.ack("failures", events[0].cursor)
    assert _lag("failures") == 0


@pytest.mark.django_db
def test_a_capped_lag_counts_up_to_one_past_the_cap_filtered_or_not():
    billing, other = _run("billing"), _run("shipping")
    for _ in range(5):
        _event(billing, "run.completed")
        _event(other, "run.completed")
    workflows.create_consumer("all")
    workflows.create_consumer("billing", workflows=["billing"])
    lags = {lag.name: lag.lag for lag in consumer_lags(cap=3)}
    assert lags == {"all": 4, "billing": 4}
    lags = {lag.name: lag.lag for lag in consumer_lags(cap=20)}
    assert lags == {"all": 10, "billing": 5}
    assert {lag.name: lag.lag for lag in consumer_lags()} == lags
