"""Run metadata: a run's title and trigger at its start, its business key set after the
start (unique per live run where the workflow says so), and dismissing an ended run."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

import workflows
from tests.support.runs import run_inline
from workflows import (
    BusinessKeyInUse,
    InvalidInput,
    InvalidTransition,
    PermanentError,
    SubWorkflow,
    Task,
    WaitForSignal,
    Workflow,
)
from workflows.models import Event, Run
from workflows.queries import Attention, attention_of, runs_needing_attention
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db
HERE = "tests.engine.runs.test_run_metadata"


def fail(ctx: Any) -> None:
    raise PermanentError("no")


class Waits(Workflow):
    """A run that stays live until signalled."""

    name = "meta_waits"
    hold = WaitForSignal("go")


class Keyed(Workflow):
    """One live run per business key."""

    name = "meta_keyed"
    unique_business_key = True
    hold = WaitForSignal("go")


class Fails(Workflow):
    name = "meta_fails"
    unique_business_key = True
    boom = Task(f"{HERE}.fail")


class Parent(Workflow):
    name = "meta_parent"
    child = SubWorkflow("meta_waits")


def events(run: Run, kind: str) -> list[dict[str, Any]]:
    return list(Event.objects.filter(run=run, type=kind).values_list("payload", flat=True))


# Title and trigger ------------------------------------------------------------------


def test_a_title_is_stored_and_a_python_start_is_triggered_by_code():
    run = workflows.start_run(Waits, title="Order 1234 for ACME")
    assert (run.title, run.trigger) == ("Order 1234 for ACME", "code")
    assert workflows.start_run(Waits).title == ""


@pytest.mark.parametrize(
    ("title", "says"),
    [
        (12, "title must be a string"),
        ("x" * 201, "title is 201 characters long; the limit is 200"),
        ("a\x00b", "title contains a NUL character"),
    ],
)
def test_a_title_that_cannot_be_stored_is_refused_before_anything_is_written(title, says):
    with pytest.raises(InvalidInput, match=says):
        workflows.start_run(Waits, title=title)
    assert not Run.objects.exists()


def test_an_unknown_trigger_is_refused():
    with pytest.raises(InvalidInput, match="trigger must be one of code, api"):
        workflows.start_run(Waits, trigger="carrier pigeon")
    assert not Run.objects.exists()


def test_title_and_trigger_are_not_part_of_the_idempotency_fingerprint():
    first = workflows.start_run_once(Waits, idempotency_key="k", title="first", trigger="api")
    again = workflows.start_run_once(Waits, idempotency_key="k", title="second")
    assert (again.created, again.value.pk) == (False, first.value.pk)
    assert (again.value.title, again.value.trigger) == ("first", "api")


def test_a_child_run_is_triggered_by_its_parent():
    parent = run_inline(Parent)
    child = Run.objects.get(parent_run=parent)
    assert (parent.trigger, child.trigger) == ("code", "child")


# set_business_key -----------------------------------------------------------------


def test_set_business_key_sets_it_bumps_the_version_and_records_it():
    run = workflows.start_run(Waits, business_key="old")
    user = User.objects.create(username="operator")
    after = workflows.set_business_key(run, "ORDER-1", user=user)
    assert (after.business_key, after.version) == ("ORDER-1", run.version + 1)
    assert events(run, "run.business_key_set") == [
        {"by": "operator", "from": "old", "to": "ORDER-1"}
    ]


def test_set_business_key_is_idempotent():
    run = workflows.set_business_key(workflows.start_run(Waits), "ORDER-1")
    again = workflows.set_business_key(run, "ORDER-1")
    assert again.version == run.version
    assert len(events(run, "run.business_key_set")) == 1


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("", "must not be empty"),
        ("   ", "must not be empty"),
        ("a\x00b", "NUL"),
        ("k" * 256, "the limit is 255"),
        (7, "must be a string"),
    ],
)
def test_set_business_key_refuses_a_key_that_cannot_be_one(key, says):
    run = workflows.start_run(Waits)
    with pytest.raises(InvalidInput, match=says):
        workflows.set_business_key(run, key)
    assert Run.objects.get(pk=run.pk).version == run.version


def test_set_business_key_refuses_an_ended_run():
    run = run_inline(Fails)
    assert run.status == "failed"
    with pytest.raises(InvalidTransition, match="run is failed; business_key needs"):
        workflows.set_business_key(run, "late")


def test_keys_are_shared_freely_by_a_workflow_without_unique_keys():
    workflows.start_run(Waits, business_key="same")
    other = workflows.set_business_key(workflows.start_run(Waits), "same")
    assert Run.objects.filter(business_key="same").count() == 2
    assert other.business_key == "same"


def test_a_unique_key_held_by_a_live_run_is_refused_to_a_setter_and_a_start():
    workflows.start_run(Keyed, business_key="ORDER-1")
    other = workflows.start_run(Keyed)
    with pytest.raises(BusinessKeyInUse, match="'ORDER-1' is held by another live run"):
        workflows.set_business_key(other, "ORDER-1")
    assert Run.objects.get(pk=other.pk).business_key == ""
    assert not events(other, "run.business_key_set")
    with pytest.raises(BusinessKeyInUse):
        workflows.start_run(Keyed, business_key="ORDER-1")
    assert Run.objects.filter(workflow_name="meta_keyed").count() == 2


def test_an_idempotent_repeat_of_a_keyed_start_returns_the_run():
    first = workflows.start_run(Keyed, business_key="ORDER-1", idempotency_key="i")
    assert workflows.start_run(Keyed, business_key="ORDER-1", idempotency_key="i") == first


def test_an_ended_run_frees_its_unique_key():
    ended = run_inline(Fails, business_key="ORDER-1")
    assert ended.status == "failed"
    again = workflows.start_run(Fails, business_key="ORDER-1")
    assert again.business_key == "ORDER-1"


def test_retrying_a_run_whose_unique_key_another_live_run_took_is_refused():
    ended = run_inline(Fails, business_key="ORDER-1")
    workflows.start_run(Fails, business_key="ORDER-1")  # live: ready, not yet claimed
    with pytest.raises(BusinessKeyInUse, match="held by another live run"):
        workflows.retry_run(ended)
    assert Run.objects.get(pk=ended.pk).status == "failed"


# dismiss_run / undismiss_run --------------------------------------------------------


def test_only_an_ended_run_is_dismissed():
    run = workflows.start_run(Waits)
    with pytest.raises(InvalidTransition, match="run is waiting; dismiss needs"):
        workflows.dismiss_run(run)
    with pytest.raises(InvalidTransition, match="run is waiting; undismiss needs"):
        workflows.undismiss_run(run)
    assert Run.objects.get(pk=run.pk).dismissed_at is None


def test_dismiss_records_when_and_by_whom_and_undismiss_takes_it_back():
    run = run_inline(Fails)
    user = User.objects.create(username="operator")
    dismissed = workflows.dismiss_run(run, user=user)
    assert dismissed.dismissed_at is not None
    assert (dismissed.dismissed_by, dismissed.version) == (user, run.version + 1)
    assert events(run, "run.dismissed") == [{"by": "operator"}]
    shown = workflows.undismiss_run(run)
    assert (shown.dismissed_at, shown.dismissed_by, shown.version) == (None, None, run.version + 2)
    assert events(run, "run.undismissed") == [{"by": None}]


def test_dismissing_twice_or_undismissing_a_shown_run_writes_nothing():
    run = run_inline(Fails)
    assert workflows.undismiss_run(run).version == run.version
    dismissed = workflows.dismiss_run(run)
    assert workflows.dismiss_run(run).version == dismissed.version
    assert len(events(run, "run.dismissed")) == 1
    assert not events(run, "run.undismissed")


def test_a_dismissed_failed_run_needs_no_attention():
    run = run_inline(Fails)
    assert list(runs_needing_attention(Attention.FAILED)) == [run]
    workflows.dismiss_run(run)
    assert not runs_needing_attention(Attention.FAILED).exists()
    assert list(runs_needing_attention(Attention.OK)) == [run]
    assert Run.objects.annotate(a=attention_of()).get(pk=run.pk).a == Attention.OK
    workflows.undismiss_run(run)
    assert list(runs_needing_attention(Attention.FAILED)) == [run]


def test_a_retry_brings_a_dismissed_run_back_undismissed():
    run = workflows.dismiss_run(run_inline(Fails))
    retried = workflows.retry_run(run)
    assert (retried.status, retried.dismissed_at, retried.dismissed_by) == ("running", None, None)
    run_pending()
    assert Run.objects.get(pk=run.pk).status == "failed"
    assert Run.objects.get(pk=run.pk).dismissed_at is None


def test_a_rerun_brings_a_dismissed_run_back_undismissed():
    run = workflows.dismiss_run(run_inline(Fails))
    rerun = workflows.rerun_from(run, "boom")
    assert (rerun.status, rerun.dismissed_at) == ("running", None)
