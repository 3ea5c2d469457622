"""``workflows.explain``: what a run waits on, what an operator may do, whether it needs
attention; the same classes from ``runs_needing_attention`` in SQL; a fixed query count.

Runs are put in each state by the engine itself; where time must pass, a plain ORM
update moves a due time, a lease expiry or a ``ready`` row's ``updated_at`` back.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import workflows
from tests.support.handlers import AWAIT_MAPPING, NOOP
from workflows import (
    FanOut,
    Gate,
    PermanentError,
    Retry,
    Sleep,
    SubWorkflow,
    Task,
    WaitForSignal,
    Workflow,
)
from workflows.checks import check_settings
from workflows.conf import workflow_settings
from workflows.engine import COMPENSATION, ITEM, claim, claim_step, complete_work, fail_attempt
from workflows.engine.guards import RUN_VERBS, STEP_VERBS
from workflows.holds import HoldKind
from workflows.models import CompensationRecord, Event, FanOutItem, Run, Step, Timer
from workflows.queries import Attention, runs_needing_attention
from workflows.queries.explain import QUERIES, Explanation, WaitingOn
from workflows.services import pause_run
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.queries.test_explain"
ONCE = Retry(max_attempts=1)


def refuse(ctx):
    raise PermanentError("card declined")


def flaky(ctx):
    raise RuntimeError("bank unreachable")


def ask_bank(ctx):
    return ctx.await_callback(timeout=timedelta(minutes=10))


def book(ctx):
    return f"booking-{ctx.step_name}"


def undo(ctx):
    raise PermanentError("cannot undo")


def ship(ctx):
    if ctx.item == "broken":
        raise PermanentError("cannot ship")
    return ctx.item


class Approval(Workflow):
    name = "explain_approval"
    approve = Gate(
        prompt="Ship order {input[order]}?",
        timeout=timedelta(hours=2),
        on_timeout="approve",
        permission="auth.change_user",
        assignees=["alice", "group:ops"],
    )
    ship = Task(NOOP)


class Nap(Workflow):
    name = "explain_nap"
    nap = Sleep(timedelta(hours=1))


class Flaky(Workflow):
    name = "explain_flaky"
    call = Task(f"{HERE}.flaky", retry=Retry(max_attempts=2, initial_interval=timedelta(minutes=5)))


class Payment(Workflow):
    name = "explain_payment"
    paid = WaitForSignal("paid", timeout=timedelta(days=1))


class Bank(Workflow):
    name = "explain_bank"
    transfer = Task(f"{HERE}.ask_bank")


class Child(Workflow):
    name = "explain_child"
    approval = Gate(prompt="child ok?")


class Parent(Workflow):
    name = "explain_parent"
    child = SubWorkflow("explain_child")


class ChildPerItem(Workflow):
    name = "explain_child_per_item"
    children = FanOut(
        workflow="explain_child",
        items=lambda ctx: ["a", "b", "c"],
        key=lambda item: item,
        max_parallel=2,
    )


class Shipping(Workflow):
    name = "explain_shipping"
    ship = FanOut(
        f"{HERE}.ship",
        items=lambda ctx: ctx.input["parcels"],
        key=lambda item: item,
        max_parallel=2,
        tolerated_failures=1,
        retry=ONCE,
    )


class Single(Workflow):
    name = "explain_single"
    work = Task(NOOP, timeout=timedelta(minutes=1))
    then = Task(NOOP)


class Declined(Workflow):
    name = "explain_declined"
    first = Task(NOOP)
    charge = Task(f"{HERE}.refuse", retry=ONCE)
    never = Task(NOOP)


class Trip(Workflow):
    name = "explain_trip"
    flight = Task(f"{HERE}.book", compensate=f"{HERE}.undo", retry=ONCE)
    pay = Task(f"{HERE}.refuse", retry=ONCE)


def chain_of(length: int) -> type[Workflow]:
    body = {f"s{i:03d}": Task(NOOP) for i in range(length)}
    return type(
        f"Chain{length}",
        (Workflow,),
        {"__module__": __name__, "name": f"explain_chain_{length}", **body},
    )


SHORT = chain_of(3)
LONG = chain_of(60)


class Many(Workflow):
    name = "explain_many"
    work = FanOut(NOOP, items=lambda ctx: list(range(ctx.input["n"])), max_parallel=3)


def holds(run: Run, kind: str, **kwargs: Any) -> list[dict[str, Any]]:
    """The run's ``waiting_on`` entries of ``kind``, as JSON."""
    return [
        entry for entry in explain_checked(run, **kwargs)["waiting_on"] if entry["kind"] == kind
    ]


def explain_checked(run: Run, **kwargs: Any) -> dict[str, Any]:
    """Explain ``run``; check the SQL filter puts it in the same attention class (and only
    there), and the explanation survives a plain JSON round trip."""
    explanation = workflows.explain(run, **kwargs)
    assert isinstance(explanation, Explanation)
    data = explanation.as_dict()
    assert json.loads(json.dumps(data)) == data
    scope = Run.objects.filter(pk=run.pk)
    classes = [
        kind
        for kind in Attention.values
        if runs_needing_attention(kind, now=kwargs.get("now"), runs=scope).exists()
    ]
    assert classes == [data["attention"]]
    return data


def attention(run: Run, **kwargs: Any) -> str:
    return explain_checked(run, **kwargs)["attention"]


def shift(model: type, pk: int, **fields: timedelta) -> None:
    """Move a row's times back, as if that much time had passed."""
    row = model.objects.get(pk=pk)
    model.objects.filter(pk=pk).update(
        **{name: getattr(row, name) - delta for name, delta in fields.items()}
    )


def actions(run: Run) -> list[tuple[str, str | None, bool, str | None]]:
    return [
        (action["verb"], action["step"], action["allowed"], action["reason"])
        for action in explain_checked(run)["allowed_actions"]
    ]


# waiting_on, one kind at a time


def test_a_gate_says_its_prompt_deciders_due_time_and_timeout_action():
    run = workflows.start_run(Approval, {"order": "A-1"})
    timer = Timer.objects.get(run=run, kind="gate_timeout")
    [gate] = holds(run, "gate")
    assert gate == {
        "kind": "gate",
        "step": "approve",
        "step_id": run.steps.get(name="approve").pk,
        "prompt": "Ship order A-1?",
        "users": ["alice"],
        "groups": ["ops"],
        "permission": "auth.change_user",
        "due_at": timer.due_at.isoformat(),
        "on_timeout": "approve",
        "claimed_by": None,
        "claimed_at": None,
    }
    [timeout] = holds(run, "timeout")
    assert (timeout["step"], timeout["fires"], timeout["overdue"]) == (
        "approve",
        "gate_timeout",
        False,
    )
    assert attention(run) == "ok"


def test_a_gate_of_an_unregistered_definition_reads_its_timeout_action_from_the_snapshot(
    unregistered,
):
    run = workflows.start_run(Approval, {"order": "A-2"})
    unregistered(Approval)
    assert holds(run, "gate")[0]["on_timeout"] == "approve"
    Run.objects.filter(pk=run.pk).update(snapshot={})
    assert holds(run, "gate")[0]["on_timeout"] is None


def test_a_sleep_and_a_retry_backoff_are_holds_of_their_own_with_their_due_time():
    run = workflows.start_run(Nap)
    [timer] = holds(run, "sleep")
    due_at = Timer.objects.get(run=run).due_at
    assert timer == {
        "kind": "sleep",
        "step": "nap",
        "fires": "sleep",
        "due_at": due_at.isoformat(),
        "overdue": False,
        "item": None,
        "compensation": None,
    }
    flaky = workflows.start_run(Flaky)
    run_pending()
    [retry] = holds(flaky, "retry")
    assert (retry["step"], retry["fires"]) == ("call", "retry")
    assert attention(flaky) == "ok"


def test_a_signal_says_its_name_and_timeout():
    run = workflows.start_run(Payment)
    due_at = Timer.objects.get(run=run, kind="signal_timeout").due_at
    assert holds(run, "signal") == [
        {"kind": "signal", "step": "paid", "name": "paid", "due_at": due_at.isoformat()}
    ]


def test_a_callback_says_when_it_expires():
    run = workflows.start_run(Bank)
    run_pending()
    due_at = Timer.objects.get(run=run, kind="callback_timeout").due_at
    assert holds(run, "callback") == [
        {"kind": "callback", "step": "transfer", "attempt": 1, "expires_at": due_at.isoformat()}
    ]
    assert holds(run, "lease") == []


class Mapping(Workflow):
    name = "explain_await"
    load = Task(AWAIT_MAPPING, awaits=["mapping", "skip"])


def test_an_await_says_its_signals_and_timeout_and_the_workflows_show_command_too():
    run = workflows.start_run(Mapping)
    run_pending()
    step = Step.objects.get(run=run)
    due_at = Timer.objects.get(run=run, kind="await_timeout").due_at
    assert holds(run, "await") == [
        {
            "kind": "await",
            "step": "load",
            "signals": ["mapping", "skip"],
            "names": "“mapping” or “skip”",
            "since": step.awaiting["since"],
            "due_at": due_at.isoformat(),
        }
    ]
    assert holds(run, "callback") == holds(run, "lease") == []
    out = StringIO()
    call_command("workflows_show", str(run.pk), stdout=out)
    assert "Task “load” awaits signal “mapping” or “skip”; times out in" in out.getvalue()


def test_a_sub_workflow_step_waits_on_its_child_run():
    run = workflows.start_run(Parent)
    child = Run.objects.get(parent_run=run)
    assert holds(run, "child") == [
        {
            "kind": "child",
            "step": "child",
            "run": str(child.pk),
            "workflow": "explain_child",
            "status": "waiting",
            "item": None,
        }
    ]
    assert [gate["step"] for gate in holds(child, "gate")] == ["approval"]


def test_fan_out_items_wait_on_their_child_runs():
    run = workflows.start_run(ChildPerItem)
    children = holds(run, "child")
    assert [(child["step"], child["item"], child["status"]) for child in children] == [
        ("children", "a", "waiting"),
        ("children", "b", "waiting"),
    ]
    [fanout] = holds(run, "fanout")
    assert (fanout["running"], fanout["pending"]) == (2, 1)


def test_a_fan_out_counts_its_items_and_the_failures_it_still_tolerates():
    run = workflows.start_run(Shipping, {"parcels": ["p1", "p2", "broken", "p4", "p5"]})
    [fanout] = holds(run, "fanout")
    assert fanout == {
        "kind": "fanout",
        "step": "ship",
        "total": 5,
        "done": 0,
        "failed": 0,
        "skipped": 0,
        "running": 0,
        "pending": 5,
        "tolerance_left": 1,
    }
    first, second = FanOutItem.objects.filter(step__run=run, status="ready").order_by("index")
    complete_work(claim(ITEM, first.pk, "worker-1"), "p1")
    claim(ITEM, second.pk, "worker-2")
    broken = FanOutItem.objects.get(step__run=run, key="broken")
    fail_attempt(claim(ITEM, broken.pk, "worker-3"), PermanentError("cannot ship"))
    [fanout] = holds(run, "fanout")
    assert {key: fanout[key] for key in ("done", "failed", "running", "pending")} == {
        "done": 1,
        "failed": 1,
        "running": 1,
        "pending": 2,
    }
    assert fanout["tolerance_left"] == 0
    [lease] = holds(run, "lease")
    assert (lease["step"], lease["unit"], lease["item"], lease["worker"]) == (
        "ship",
        "item",
        "p2",
        "worker-2",
    )
    assert [(entry["unit"], entry["item"]) for entry in holds(run, "dispatch")] == [("item", "p4")]


def test_a_running_step_says_its_worker_lease_and_attempt():
    run = workflows.start_run(Single)
    step = run.steps.get(name="work")
    claim_step(step.pk, "worker-1")
    step.refresh_from_db()
    assert holds(run, "lease") == [
        {
            "kind": "lease",
            "step": "work",
            "unit": "step",
            "item": None,
            "worker": "worker-1",
            "expires_at": step.lease_expires_at.isoformat(),
            "expired": False,
            "attempt": 1,
            "max_attempts": 3,
            # The claim took the lease for the step's timeout (a minute).
            "heartbeat_at": (step.lease_expires_at - timedelta(minutes=1)).isoformat(),
            "cancel_requested_at": None,
        }
    ]
    assert holds(run, "dispatch") == []


def test_a_running_step_of_a_cancelling_run_says_since_when_it_was_asked_to_stop():
    run = workflows.start_run(Single)
    step = run.steps.get(name="work")
    claim_step(step.pk, "worker-1")
    workflows.cancel_run(run, reason="not needed")
    cancelling = Event.objects.get(run=run, type="run.cancelling")

    (entry,) = holds(run, "lease")

    assert entry["cancel_requested_at"] == cancelling.created_at.isoformat()
    assert entry["worker"] == "worker-1"


def test_ready_work_says_since_when_it_waits_for_a_worker():
    run = workflows.start_run(Single)
    step = run.steps.get(name="work")
    assert holds(run, "dispatch") == [
        {
            "kind": "dispatch",
            "step": "work",
            "unit": "step",
            "item": None,
            "since": step.updated_at.isoformat(),
            "undispatched": False,
        }
    ]


def compensating_trip() -> tuple[Run, CompensationRecord]:
    run = workflows.start_run(Trip)
    run_pending(max_rounds=1)  # flight completes (chained), pay fails: the undo is ready
    run.refresh_from_db()
    assert run.status == "compensating"
    return run, CompensationRecord.objects.get(run=run)


def test_a_compensation_in_progress_is_listed_with_its_worker():
    run, record = compensating_trip()
    assert holds(run, "compensation") == [
        {
            "kind": "compensation",
            "step": "flight",
            "sequence": record.sequence,
            "handler": f"{HERE}.undo",
            "status": "ready",
            "attempt": 0,
            "item": None,
        }
    ]
    assert [(entry["step"], entry["unit"]) for entry in holds(run, "dispatch")] == [
        ("flight", "compensation")
    ]
    claim(COMPENSATION, record.pk, "undoer")
    [lease] = holds(run, "lease")
    assert (lease["step"], lease["unit"], lease["worker"]) == ("flight", "compensation", "undoer")
    assert holds(run, "compensation")[0]["status"] == "running"


def test_a_paused_run_says_why_by_whom_and_holds_its_timers_on_purpose():
    run = workflows.start_run(Nap)
    user = User.objects.create_user("operator")
    pause_run(run, reason="vendor outage", user=user)
    [paused] = holds(run, "paused")
    assert (paused["step"], paused["reason"], paused["by"]) == (None, "vendor outage", "operator")
    assert paused["at"] is not None
    assert holds(run, "sleep")[0]["fires"] == "sleep"
    timer = Timer.objects.get(run=run)
    shift(Timer, timer.pk, due_at=timedelta(hours=3))
    assert holds(run, "sleep")[0]["overdue"] is False
    assert attention(run) == "ok"


# attention


def test_a_timer_past_due_beyond_the_grace_is_overdue():
    run = workflows.start_run(Nap)
    timer = Timer.objects.get(run=run)
    now = timer.due_at + timedelta(seconds=30)
    assert attention(run, now=now) == "ok"  # due, within the grace
    now = timer.due_at + workflow_settings.ATTENTION_OVERDUE_GRACE + timedelta(seconds=1)
    assert attention(run, now=now) == "overdue"
    assert holds(run, "sleep", now=now)[0]["overdue"] is True


def test_a_lease_past_its_expiry_and_not_reclaimed_is_lease_expired():
    run = workflows.start_run(Single)
    step = run.steps.get(name="work")
    claim_step(step.pk, "worker-1")
    assert attention(run) == "ok"
    shift(Step, step.pk, lease_expires_at=timedelta(minutes=2))
    assert attention(run) == "lease_expired"
    assert holds(run, "lease")[0]["expired"] is True


def test_ready_work_nobody_claimed_within_the_grace_is_undispatched():
    run = workflows.start_run(Single)
    step = run.steps.get(name="work")
    grace = workflow_settings.ATTENTION_UNDISPATCHED_GRACE
    assert grace == workflow_settings.REDISPATCH_AFTER + timedelta(seconds=30)
    shift(Step, step.pk, updated_at=grace - timedelta(seconds=5))
    assert attention(run) == "ok"
    shift(Step, step.pk, updated_at=timedelta(seconds=10))
    assert attention(run) == "undispatched"
    assert holds(run, "dispatch")[0]["undispatched"] is True


def test_attention_classes_apply_in_priority_order():
    run = workflows.start_run(Single)
    step = run.steps.get(name="work")
    shift(Step, step.pk, updated_at=timedelta(hours=1))
    assert attention(run) == "undispatched"
    claim_step(step.pk, "worker-1")
    shift(Step, step.pk, lease_expires_at=timedelta(hours=1))
    Timer.objects.create(
        run=run, step=step, kind="sleep", due_at=timezone.now() - timedelta(hours=1)
    )
    assert attention(run) == "lease_expired"


def test_a_failed_run_is_failed():
    run = workflows.start_run(Declined)
    run_pending()
    assert attention(run) == "failed"


def test_a_terminated_run_is_failed_only_when_its_error_is_a_failure():
    run = workflows.start_run(Single)
    Run.objects.filter(pk=run.pk).update(
        status="terminated", error={"code": "terminated", "message": "stop"}
    )
    assert attention(run) == "ok"  # an operator's decision, already taken
    Run.objects.filter(pk=run.pk).update(error={"code": "step_failed", "message": "boom"})
    assert attention(run) == "failed"
    Run.objects.filter(pk=run.pk).update(error={"message": "no code"})
    assert attention(run) == "failed"


def test_a_run_whose_compensation_failed_is_compensation_failed():
    run, _ = compensating_trip()
    run_pending()
    run.refresh_from_db()
    assert run.status == "compensation_failed"
    assert attention(run) == "compensation_failed"


def test_runs_needing_attention_filters_many_runs_in_sql():
    fine = workflows.start_run(Single)
    stuck = workflows.start_run(Single)
    shift(Step, stuck.steps.get(name="work").pk, updated_at=timedelta(hours=1))
    failed = workflows.start_run(Declined)
    run_pending(max_rounds=1)
    runs = Run.objects.filter(pk__in=[fine.pk, stuck.pk, failed.pk])
    for run in (fine, stuck):
        run.refresh_from_db()
    assert set(runs_needing_attention("undispatched", runs=runs)) == set()  # ran meanwhile
    assert set(runs_needing_attention("failed", runs=runs)) == {failed}
    assert set(runs_needing_attention(Attention.OK, runs=runs)) == {fine, stuck}
    with pytest.raises(ValueError, match="unknown attention class 'stuck'"):
        runs_needing_attention("stuck")


# allowed_actions


def run_verbs(status: str) -> list[tuple[str, str | None, bool, str | None]]:
    """The run verbs as ``explain`` lists them for a run in ``status`` not dismissed."""
    rows = []
    for verb in RUN_VERBS.values():
        reason = verb.refusal(status)
        if reason is None and verb.name == "undismiss":
            reason = "run is not dismissed"
        rows.append((verb.name, None, reason is None, reason))
    return rows


def test_a_completed_run_may_only_be_rerun_or_dismissed():
    run = workflows.start_run(SHORT)
    run_pending()
    assert actions(run) == run_verbs("completed")
    assert [verb for verb, _, allowed, _ in actions(run) if allowed] == ["rerun", "dismiss"]
    workflows.dismiss_run(run)
    allowed = [verb for verb, _, allowed, _ in actions(run) if allowed]
    assert allowed == ["rerun", "undismiss"]
    assert ("dismiss", None, False, "run is dismissed already") in actions(run)
    assert RUN_VERBS["cancel"].refusal("completed") in [reason for *_, reason in actions(run)]


def test_a_failed_run_may_be_retried_and_its_failed_step_retried_or_skipped():
    run = workflows.start_run(Declined)
    run_pending()
    run.refresh_from_db()
    assert run.status == "failed"
    step_actions = [
        (verb.name, "charge", True, None)
        for verb in STEP_VERBS.values()
        if "failed" in verb.accepts  # revoke is offered for running steps only
    ]
    assert [verb for verb, *_ in step_actions] == ["retry_step", "skip_step"]
    assert actions(run) == run_verbs("failed") + step_actions


def test_a_waiting_run_may_be_stopped_paused_and_its_gate_decided_or_skipped():
    run = workflows.start_run(Approval, {"order": "A-3"})
    pending = STEP_VERBS["skip_step"]
    assert actions(run) == [
        *run_verbs("waiting"),
        ("skip_step", "approve", True, None),
        ("approve", "approve", True, None),
        ("reject", "approve", True, None),
        ("skip_step", "ship", pending.refusal("pending", "waiting") is None, None),
    ]
    refused = {verb: reason for verb, step, allowed, reason in actions(run) if not allowed}
    assert refused == {
        verb: RUN_VERBS[verb].refusal("waiting")
        for verb in ("resume", "retry", "rerun", "dismiss", "undismiss")
    }


def test_a_step_verb_refused_by_the_run_says_so_in_the_guards_words():
    run, _ = compensating_trip()
    [(_, step, allowed, reason)] = [action for action in actions(run) if action[0] == "retry_step"]
    assert (step, allowed) == ("pay", False)
    assert reason == STEP_VERBS["retry_step"].refusal("failed", "compensating")


# cost


def statements(captured: CaptureQueriesContext) -> list[str]:
    skipped = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK")
    return [q["sql"] for q in captured.captured_queries if not q["sql"].startswith(skipped)]


def cost(run: Run) -> int:
    """Explain's queries; each must be a read, and none may open a transaction."""
    with CaptureQueriesContext(connection) as captured:
        workflows.explain(run)
    assert [q["sql"] for q in captured.captured_queries] == statements(captured)
    assert all(sql.lstrip().upper().startswith("SELECT") for sql in statements(captured))
    return len(statements(captured))


def test_explain_costs_a_fixed_number_of_queries_whatever_the_run_size():
    short, long = workflows.start_run(SHORT), workflows.start_run(LONG)
    for run in (short, long):
        complete_work(claim_step(run.steps.get(name="s000").pk, "w"), None)
    assert cost(short) == cost(long) == QUERIES
    few = workflows.start_run(Many, {"n": 5})
    lots = workflows.start_run(Many, {"n": 2000})
    for run in (few, lots):
        item = FanOutItem.objects.filter(step__run=run, status="ready").first()
        complete_work(claim(ITEM, item.pk, "w"), None)
    assert cost(few) == cost(lots) == QUERIES
    pause_run(lots, reason="audit")
    assert cost(lots) == QUERIES


# surfaces


def test_explain_takes_a_run_id_and_names_an_unknown_one():
    run = workflows.start_run(Single)
    assert workflows.explain(str(run.pk)).run == run.pk
    with pytest.raises(workflows.RunNotFound):
        workflows.explain("00000000-0000-0000-0000-000000000000")


def test_explanation_reports_the_run_row_version_and_its_steps():
    run = workflows.start_run(SHORT)
    run.refresh_from_db()
    explanation = workflows.explain(run)
    assert (explanation.status, explanation.version) == ("running", run.version)
    assert [(step["name"], step["status"]) for step in explanation.steps] == [
        ("s000", "ready"),
        ("s001", "pending"),
        ("s002", "pending"),
    ]
    entry = WaitingOn(HoldKind.QUEUED, None, {"message": "queued"})
    assert entry.as_dict() == {"kind": "queued", "step": None, "message": "queued"}
    with pytest.raises(ValueError):
        WaitingOn("nothing of the table", None)  # type: ignore[arg-type]


def show(*args: str) -> str:
    out = StringIO()
    call_command("workflows_show", *args, stdout=out)
    return out.getvalue()


def test_workflows_show_prints_what_the_run_waits_on_and_what_may_be_done():
    run = workflows.start_run(Approval, {"order": "A-4"})
    output = show(str(run.pk))
    assert "attention        ok" in output
    rest = output.split("\nwaiting on\n")[1]
    waiting, rest = rest.split("\nallowed actions\n")
    allowed = rest.split("\nsteps\n")[0]
    assert waiting.splitlines()[0].split() == ["KIND", "STEP", "WHAT"]
    assert waiting.splitlines()[1].split()[:2] == ["gate", "approve"]
    assert "Gate “approve” waits for a decision: Ship order A-4?; times out in" in waiting
    assert "The gate timeout of “approve” fires in" in waiting
    rows = [re.split(r"\s{2,}", line) for line in allowed.splitlines()]
    assert rows[0] == ["ACTION", "STEP", "ALLOWED", "REASON"]
    assert ["cancel", "-", "yes", "-"] in rows
    assert ["approve", "approve", "yes", "-"] in rows
    assert ["resume", "-", "no", RUN_VERBS["resume"].refusal("waiting")] in rows


def test_workflows_show_json_includes_the_explanation():
    run = workflows.start_run(Approval, {"order": "A-5"})
    out = StringIO()
    call_command("workflows_show", str(run.pk), "--json", stdout=out)
    data = json.loads(out.getvalue())
    expected = workflows.explain(run).as_dict()
    assert data["explain"].pop("as_of") and expected.pop("as_of")
    assert data["explain"] == expected
    assert data["status"] == "waiting"


# settings


def test_the_undispatched_grace_follows_redispatch_after_unless_set():
    with override_settings(WORKFLOWS={"REDISPATCH_AFTER": timedelta(minutes=5)}):
        grace = workflow_settings.ATTENTION_UNDISPATCHED_GRACE
        assert grace == timedelta(minutes=5, seconds=30)
    with override_settings(WORKFLOWS={"ATTENTION_UNDISPATCHED_GRACE": timedelta(minutes=2)}):
        grace = workflow_settings.ATTENTION_UNDISPATCHED_GRACE
        assert grace == timedelta(minutes=2)
    grace = workflow_settings.ATTENTION_OVERDUE_GRACE
    assert grace == timedelta(minutes=1)


@pytest.mark.parametrize("value", [timedelta(seconds=-1), 60, None])
def test_an_attention_grace_must_be_a_non_negative_duration(value):
    with override_settings(WORKFLOWS={"ATTENTION_OVERDUE_GRACE": value}):
        with pytest.raises(ImproperlyConfigured, match="ATTENTION_OVERDUE_GRACE"):
            workflow_settings.ATTENTION_OVERDUE_GRACE  # noqa: B018
        assert [error.id for error in check_settings()] == ["workflows.E002"]
