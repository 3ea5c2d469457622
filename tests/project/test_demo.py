"""The demo project's workflows run to completion and leave visible records."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.core.management import call_command
from django.utils import timezone

import workflows
from flowsite import settings as demo_settings
from flowsite.demo.flows import STOCK_CHECK_SCHEDULE, StockCheck
from flowsite.demo.label_account import TOKEN, USERNAME
from flowsite.demo.models import DemoRecord
from flowsite.demo.stock_sync import MEMBERS, build_stock_sync
from flowsite.label_printer import label_for
from tests.support.runs import run_inline
from tests.support.users import staff
from workflows.models import Flow, Run, Schedule, Step
from workflows.queries.flows import flow_graph
from workflows.services.schedules import install_declared_schedules
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

ORDER = {
    "order_id": "T-1",
    "gift": True,
    "lines": [{"sku": "BOOK", "quantity": 2, "price": "10.00"}],
}


def minutes_on(run: Run, minutes: int = 1) -> Run:
    """``run`` read again once its work due within ``minutes`` from now has run inline."""
    run_pending(until=timezone.now() + timedelta(minutes=minutes))
    run.refresh_from_db()
    return run


def record_kinds(run: Run) -> list[str]:
    """The kinds of the demo records the run's handlers wrote, sorted."""
    return sorted(DemoRecord.objects.filter(run_id=run.pk).values_list("kind", flat=True))


def test_order_fulfilment_runs_every_branch_and_sleeps():
    run = run_inline("order_fulfilment", ORDER)
    assert run.status == "waiting"  # cooling off behind a durable timer
    run = minutes_on(run)
    assert run.status == "completed"
    assert run.output == {"send_receipt": {"to": "customer@example.com", "total": "33.00"}}
    assert record_kinds(run) == ["gift_wrap", "invoice", "receipt", "reservation"]


def test_order_without_gift_skips_wrapping():
    run = workflows.start_run("order_fulfilment", {**ORDER, "gift": False})
    run_pending(until=timezone.now() + timedelta(minutes=1))
    assert run.steps.get(name="wrap_gift").status == "skipped"
    assert run.steps.get(name="send_receipt").status == "completed"


def test_order_input_is_validated():
    with pytest.raises(workflows.InvalidInput, match="needs an 'order_id'"):
        workflows.start_run("order_fulfilment", {"lines": []})


def test_flaky_import_retries_then_succeeds_with_one_record():
    run = workflows.start_run("flaky_import", {"rows": 7})
    run = minutes_on(run, 5)
    assert run.status == "completed"
    record = DemoRecord.objects.get(run_id=run.pk)
    assert record.data == {"rows": 7, "attempts": 3}


def test_flaky_import_reports_progress_logs_and_a_summary():
    """The demo's long step moves where a new user looks: its progress bar, its log."""
    run = workflows.start_run("flaky_import", {"rows": 7})
    run_pending(until=timezone.now() + timedelta(minutes=5))
    step = run.steps.get(name="import_batch")
    assert (step.progress_done, step.progress_total) == (7, 7)
    assert step.progress_message == "importing row 7 of 7"
    assert step.summary == {"rows": 7, "imported": 7}
    lines = [(frame.attempt, frame.stream, frame.text) for frame in workflows.frames(step)]
    assert lines == [
        (1, "stdout", "attempt 1: connecting to the upstream feed"),
        (1, "stderr", "upstream feed unavailable"),
        (2, "stdout", "attempt 2: connecting to the upstream feed"),
        (2, "stderr", "upstream feed unavailable"),
        (3, "stdout", "attempt 3: connecting to the upstream feed"),
        (3, "stdout", "imported rows 1-5"),
        (3, "stdout", "imported rows 1-7"),
    ]


def test_a_cancel_stops_the_flaky_import_at_its_next_heartbeat(monkeypatch):
    """A new user cancels the long import while it runs: the row it is on is its last,
    the attempt fails as cancelled and is not retried, and the run ends cancelled."""
    run = workflows.start_run("flaky_import", {"rows": 40})
    pauses = []

    def operator_cancels_at_row_3(seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) == 3:
            workflows.cancel_run(run.pk, reason="watched enough")

    monkeypatch.setattr("flowsite.demo.steps.time.sleep", operator_cancels_at_row_3)
    run = minutes_on(run, 5)

    step = run.steps.get(name="import_batch")
    assert run.status == "cancelled"
    assert (step.status, step.attempt, step.failure_class) == ("failed", 3, "cancelled")
    assert (step.progress_done, step.progress_total) == (3, 40)
    assert len(pauses) == 3
    assert not DemoRecord.objects.filter(run_id=run.pk).exists()


def test_demo_setup_is_idempotent_and_checks_pass():
    call_command("check", fail_level="WARNING")
    first, second = StringIO(), StringIO()
    call_command("demo_setup", stdout=first)
    call_command("demo_setup", stdout=second)
    assert "created demo user admin / admin" in first.getvalue()
    assert "created demo user" not in second.getvalue()
    assert f"created service account {USERNAME} (API token {TOKEN})" in first.getvalue()
    assert "created service account" not in second.getvalue()
    printer = User.objects.get(username=USERNAME)
    assert not printer.is_staff and not printer.has_usable_password()
    assert sorted(printer.get_all_permissions()) == ["workflows.do_external_work"]
    assert printer.auth_token.key == TOKEN
    assert Run.objects.count() == 10 + len(MEMBERS)  # the sample runs and the flow's members
    assert Flow.objects.get().key == "demo-stock-sync"
    review = Run.objects.get(workflow_name="document_review")
    assert review.idempotency_key == "demo-review"


DISPATCH = {
    "order_id": "W-1",
    "parcels": [{"id": "P1", "weight_kg": 1}, {"id": "P2", "weight_kg": 2}],
}


def dispatch_waiting_for_approval(card: str):
    run = workflows.start_run("warehouse_dispatch", {**DISPATCH, "card": card})
    run_pending()
    gate = run.steps.get(name="approval")
    assert gate.status == "waiting"
    assert gate.prompt == "Dispatch order W-1 (2 parcels)?"
    return run, gate


def print_labels() -> list[str]:
    """Do what the bundled label printer does over HTTP, in process: claim every ready
    ``print_label`` and complete it with the label it would print."""
    printed = []
    for job in workflows.claim_external(["labels"], worker="test-printer", limit=10):
        workflows.complete_external(job.lease, label_for(job.input, "test-printer"))
        printed.append(job.step)
    return printed


def approved_dispatch(card: str, shipping: str) -> Run:
    """A dispatch paid with ``card``, approved by a superuser with ``shipping``, its
    label printed, a minute on."""
    admin = User.objects.create_superuser("boss")
    run, gate = dispatch_waiting_for_approval(card)
    workflows.approve_gate(gate, user=admin, selections=[shipping])
    run_pending()
    assert print_labels() == ["print_label"]
    return minutes_on(run)


def test_warehouse_dispatch_waits_for_the_external_label_printer():
    admin = User.objects.create_superuser("boss")
    run, gate = dispatch_waiting_for_approval("valid")
    workflows.approve_gate(gate, user=admin, selections=["standard"])
    run = minutes_on(run, 5)
    label = run.steps.get(name="print_label")
    assert run.status == "running" and label.status == "ready"
    [waiting] = [entry for entry in workflows.explain(run).waiting_on if entry.step == label.name]
    assert waiting.kind == "external" and waiting.details["queue"] == "labels"
    assert print_labels() == ["print_label"]
    label.refresh_from_db()
    assert label.output == {"label": "LBL-W-1", "parcels": 2, "by": "test-printer"}
    assert minutes_on(run).status == "completed"


def test_warehouse_dispatch_approved_packs_sleeps_and_charges():
    run = approved_dispatch("valid", "express")
    assert run.status == "completed"
    assert run.output == {"charge": {"order": "W-1", "shipping": "express"}}
    assert record_kinds(run) == ["charge", "parcel_packed", "parcel_packed", "stock_hold"]


def test_warehouse_dispatch_declined_card_undoes_packing_then_the_hold():
    run = approved_dispatch("declined", "standard")
    assert run.status == "compensated"
    assert run.error["message"] == "card declined by the issuer"
    undone = list(
        DemoRecord.objects.filter(run_id=run.pk, kind__in=["parcel_unpacked", "stock_released"])
        .order_by("id")
        .values_list("kind", "data__parcel")
    )
    assert undone == [
        ("parcel_unpacked", "P2"),
        ("parcel_unpacked", "P1"),
        ("stock_released", None),
    ]


def test_dispatch_gate_needs_the_dispatch_permission():
    _, gate = dispatch_waiting_for_approval("valid")
    clerk = User.objects.create_user("clerk")
    with pytest.raises(PermissionDenied, match=r"demo\.approve_dispatch"):
        workflows.approve_gate(gate, user=clerk, selections=["standard"])


def test_a_staff_user_without_a_permission_gets_the_demo_403_page(client):
    """The demo's 403 page keeps the admin around it and says what is missing."""
    client.force_login(staff("viewer", "view_run"))
    response = client.get("/admin/workflows/webhookdelivery/")
    assert response.status_code == 403
    assert b"Permission denied" in response.content
    assert b"does not have the permission this page needs" in response.content


def article(words: int, key: str = "acme") -> Run:
    run = workflows.start_run(
        "article_summary", {"title": f"{words} words", "words": words}, business_key=key
    )
    run_pending()
    return Run.objects.get(pk=run.pk)


def test_article_summary_waits_for_its_signal_then_publishes():
    run = article(1000)
    assert run.status == "waiting"
    assert run.steps.get(name="reviewed").status == "waiting"
    workflows.send_signal(run, "reviewed", {"editor": "ed"})
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    published = DemoRecord.objects.get(run_id=run.pk, kind="published")
    assert published.data == {"title": "1000 words", "editor": "ed"}


def test_catalogue_import_awaits_a_mapping_decision_mid_step_then_imports():
    run = workflows.start_run(
        "catalogue_import", {"supplier": "acme", "columns": ["sku", "colour_code", "ean"]}
    )
    run_pending()
    step = run.steps.get()
    assert step.status == "waiting" and step.awaiting["signals"] == ["mapping"]
    workflows.send_signal(run, "mapping", {"colour_code": "colour", "ean": None})
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    assert DemoRecord.objects.get(run_id=run.pk).data == {
        "supplier": "acme",
        "fields": {"sku": "sku", "colour_code": "colour"},
        "dropped": ["ean"],
    }


def test_catalogue_import_drops_unmapped_columns_after_a_day_and_knows_its_columns():
    known = workflows.start_run("catalogue_import", {"supplier": "b", "columns": ["sku"]})
    run_pending()
    known.refresh_from_db()
    assert known.status == "completed"
    run = workflows.start_run("catalogue_import", {"supplier": "c", "columns": ["sku", "x"]})
    run_pending(until=timezone.now() + timedelta(days=1, minutes=1))
    assert DemoRecord.objects.get(run_id=run.pk).data["dropped"] == ["x"]


def test_a_customer_that_used_up_its_tokens_holds_its_next_steps():
    """The demo's budget: 2,000 tokens per business key; 1.3 tokens a word."""
    first, second = article(1200), article(800)
    assert first.steps.get(name="summarise").status == "completed"
    assert second.steps.get(name="summarise").status == "completed"  # started under 2,000
    workflows.send_signal(second, "reviewed", {"editor": "ed"})
    run_pending()
    assert second.steps.get(name="publish").status == "ready"
    [hold] = workflows.explain(second).waiting_on
    assert (hold.kind, hold.step, hold.details["dimension"]) == ("budget", "publish", "tokens")
    # Another customer's budget is its own.
    other = article(100, key="globex")
    workflows.send_signal(other, "reviewed", {})
    run_pending()
    assert Run.objects.get(pk=other.pk).status == "completed"


def test_every_demo_workflow_accepts_its_own_input_example():
    from workflows.definitions import registry

    demo = [w for w in registry.all() if w.__module__ == "flowsite.demo.flows"]
    assert {w.name for w in demo} >= {
        "order_fulfilment",
        "article_summary",
        "document_review",
        "report_export",
    }
    for workflow in demo:
        assert workflow.input_example is not None, workflow.name
        assert workflow.check_input(workflow.input_example) == workflow.input_example


def review_waiting(run: Run) -> Step:
    """The review gate of ``run``, once the run has gone as far as it can."""
    run_pending()
    gate = run.steps.get(name="review")
    assert gate.status == "waiting"
    return gate


def test_document_review_rejected_goes_round_once_then_publishes():
    """A rejection sends the run back to its draft, which answers the review's feedback."""
    reviewer = User.objects.create_user("reviewer")
    run = workflows.start_run("document_review", {"title": "Leave policy"})
    gate = review_waiting(run)
    assert gate.prompt == "Review Leave policy, draft of round 1: publish it?"
    answers = "Say who approves leave"
    workflows.reject_gate(gate, user=reviewer, feedback=answers)
    gate = review_waiting(run)
    assert gate.iteration == 2
    assert gate.prompt == "Review Leave policy, draft of round 2: publish it?"
    draft = run.steps.get(name="draft")
    assert draft.iteration == 2
    assert draft.output == {"title": "Leave policy", "round": 2, "answers": answers}
    assert [i.output["round"] for i in draft.iterations.all()] == [1]
    workflows.approve_gate(gate, user=reviewer)
    run_pending()
    run.refresh_from_db()
    assert run.status == "completed"
    assert run.steps.get(name="revise").output == {"iterations": 2, "exhausted": False}
    published = DemoRecord.objects.get(run_id=run.pk, kind="document_published")
    assert published.data == {"title": "Leave policy", "rounds": 2, "by": "reviewer"}
    assert DemoRecord.objects.filter(run_id=run.pk, kind="draft").count() == 2


def test_document_review_gives_up_after_four_rounds():
    reviewer = User.objects.create_user("reviewer")
    run = workflows.start_run("document_review", {"title": "Leave policy"})
    for _ in range(4):
        workflows.reject_gate(review_waiting(run), user=reviewer, feedback="not yet")
    run_pending()
    run.refresh_from_db()
    assert run.status == "failed"
    assert (run.error["code"], run.error["iterations"]) == ("max_iterations_exceeded", 4)


def test_report_export_polls_on_a_timer_until_ready():
    run = workflows.start_run("report_export", {"report": "sales", "polls_until_ready": 3})
    run_pending()
    poll = run.steps.get(name="wait_until_ready")
    assert (poll.status, poll.iteration) == ("waiting", 2)  # asleep on its repeat timer
    run = minutes_on(run)
    assert run.status == "completed"
    assert run.output == {"deliver": {"report": "sales", "polls": 3}}
    earlier = run.steps.get(name="wait_until_ready").iterations.order_by("iteration")
    assert [i.output for i in earlier] == [{"poll": 1, "ready": False}, {"poll": 2, "ready": False}]


def test_the_demo_flow_shows_every_state_a_member_takes():
    """Once its members have run: completed ones, a failed feed, the member of an ``all``
    join after it cancelled, the ``any`` join after it still blocked (the flow is open),
    and the ``any`` join of all three feeds completed from the feeds that did."""
    flow = build_stock_sync()
    run_pending()
    graph = flow_graph(flow)
    assert {m.name: (m.status, m.join) for m in graph.members} == {
        "feed-acme": ("completed", "all"),
        "feed-globex": ("completed", "all"),
        "feed-initech": ("failed", "all"),
        "warehouse-stock": ("completed", "all"),
        "shop-prices": ("completed", "any"),
        "restock-initech": ("cancelled", "all"),
        "initech-catalogue": ("blocked", "any"),
    }
    assert graph.member("feed-initech").error["message"] == (
        "initech's stock feed was retired: the supplier answers 410 Gone"
    )
    assert graph.member("restock-initech").error["code"] == "dependency_failed"
    [waiting] = workflows.explain(graph.member("initech-catalogue").run_id).waiting_on
    assert waiting.kind == "blocked"
    assert waiting.details["message"].endswith(
        "0 of 1 completed; every upstream member has ended, so it waits for a new edge into "
        "it while the flow is open (or cancel it)"
    )
    prices = DemoRecord.objects.get(run_id=graph.member("shop-prices").run_id)
    assert prices.data["from"] in (["feed-acme"], ["feed-acme", "feed-globex"])
    stock = DemoRecord.objects.get(run_id=graph.member("warehouse-stock").run_id)
    assert stock.data == {
        "target": "warehouse",
        "from": ["feed-acme", "feed-globex"],
        "stock": {"BOOK-42": 120, "MUG-7": 65, "LAMP-3": 8},
    }
    # Built again (demo_setup run twice): the same flow, nothing added.
    assert build_stock_sync().pk == flow.pk
    assert flow_graph(flow).flow.revision == graph.flow.revision
    assert Run.objects.filter(flow_member__flow=flow).count() == len(MEMBERS)


def test_the_blocked_demo_member_starts_once_another_source_is_added():
    """What the demo's page (docs/quickstart.md) suggests: the blocked member's ``any``
    join is met by an edge from a feed that completed."""
    flow = build_stock_sync()
    run_pending()
    call_command(
        "workflows_flow",
        "edge",
        "--key",
        "demo-stock-sync",
        "feed-globex",
        "initech-catalogue",
        stdout=StringIO(),
    )
    run_pending()
    catalogue = flow_graph(flow).member("initech-catalogue")
    assert catalogue.status == "completed"
    record = DemoRecord.objects.get(run_id=catalogue.run_id)
    assert record.data["from"] == ["feed-globex"]


def test_the_demo_declares_a_stock_check_every_two_minutes_that_fires(monkeypatch):
    # Off in the test settings only: `make run` installs it at migrate.
    assert getattr(demo_settings, "DEMO_SCHEDULES", True) is True
    monkeypatch.setattr(StockCheck, "schedules", [STOCK_CHECK_SCHEDULE])
    assert install_declared_schedules().created == ["demo-stock-check"]
    schedule = Schedule.objects.get(key="demo-stock-check")
    assert (schedule.workflow_name, schedule.every) == ("stock_check", timedelta(minutes=2))
    # Slots fall on even minutes of the epoch: counting from the first one (not from
    # now, a second before a slot or not) makes two of them fire, whatever the clock.
    run_pending(until=schedule.next_fire_at + timedelta(minutes=2, seconds=1))
    runs = Run.objects.filter(schedule=schedule).order_by("scheduled_for")
    assert [run.status for run in runs] == ["completed", "completed"]
    record = DemoRecord.objects.filter(kind="stock_check").first()
    assert record is not None and record.data["total"] > 0
