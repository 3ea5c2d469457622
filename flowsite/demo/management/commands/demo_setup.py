"""Prepare the demo site: an admin login, a few sample runs and a flow (safe to run twice)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

import workflows
from flowsite.demo.label_account import TOKEN, USERNAME, ensure_label_printer
from flowsite.demo.stock_sync import KEY, MEMBERS, build_stock_sync

SAMPLE_ORDERS = [
    {
        "order_id": "A-1001",
        "email": "ada@example.com",
        "gift": True,
        "lines": [{"sku": "BOOK-42", "quantity": 2, "price": "12.50"}],
    },
    {
        "order_id": "A-1002",
        "email": "alan@example.com",
        "lines": [{"sku": "MUG-7", "quantity": 1, "price": "8.00"}],
    },
]


DISPATCH_PARCELS = [
    {"id": "P1", "weight_kg": 1.5},
    {"id": "P2", "weight_kg": 0.4},
    {"id": "P3", "weight_kg": 2.2},
    {"id": "P4", "weight_kg": 0.9},
]


# Two articles of one customer: together they use up its token budget (2,000 per
# business key), so the second's later steps wait until the budget is raised.
ARTICLES = [
    {"title": "Durable workflows in Django", "words": 1200},
    {"title": "Sagas without a message bus", "words": 800},
]
ARTICLE_CUSTOMER = "acme"


class Command(BaseCommand):
    help = (
        "Create the demo admin user (admin/admin) and the label printer's service account, "
        "start sample demo runs once and build the demo flow 'stock sync'."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(
            username="admin", defaults={"is_staff": True, "is_superuser": True}
        )
        if created:
            user.set_password("admin")
            user.save()
            self.stdout.write("created demo user admin / admin")
        if ensure_label_printer():
            self.stdout.write(
                f"created service account {USERNAME} (API token {TOKEN}): the label printer "
                "that `make run` starts does warehouse_dispatch's print_label step with it"
            )
        for order in SAMPLE_ORDERS:
            run = workflows.start_run(
                "order_fulfilment",
                order,
                idempotency_key=f"demo-{order['order_id']}",
                business_key=order["order_id"],
                user=user,
            )
            self.stdout.write(f"order_fulfilment run {run.pk} [{run.status}]")
        run = workflows.start_run("flaky_import", {"rows": 120}, idempotency_key="demo-import")
        self.stdout.write(f"flaky_import run {run.pk} [{run.status}]")
        run = workflows.start_run(
            "catalogue_import",
            {"supplier": "acme", "columns": ["sku", "name", "price", "colour_code"]},
            idempotency_key="demo-catalogue",
        )
        self.stdout.write(f"catalogue_import run {run.pk} [{run.status}] (awaits a mapping)")
        for order_id, card in (("W-2001", "valid"), ("W-2002", "declined")):
            run = workflows.start_run(
                "warehouse_dispatch",
                {"order_id": order_id, "card": card, "parcels": DISPATCH_PARCELS},
                idempotency_key=f"demo-{order_id}",
                business_key=order_id,
                user=user,
            )
            gate = run.steps.get(name="approval")
            self.stdout.write(
                f"warehouse_dispatch run {run.pk} [{run.status}]: once its gate waits, approve "
                f"with `manage.py workflows_approve {gate.pk} --user admin --select express`; "
                "the label printer then prints its label"
            )
        for number, article in enumerate(ARTICLES, start=1):
            run = workflows.start_run(
                "article_summary",
                article,
                idempotency_key=f"demo-article-{number}",
                business_key=ARTICLE_CUSTOMER,
                user=user,
            )
            self.stdout.write(
                f"article_summary run {run.pk} [{run.status}]: once it waits, send its signal "
                f"with `manage.py workflows_signal {run.pk} reviewed --payload "
                '\'{"editor": "admin"}\'`; the token budget of '
                f"{ARTICLE_CUSTOMER!r} (Budgets page) may hold it"
            )
        run = workflows.start_run(
            "document_review",
            {"title": "Expense policy", "author": "admin"},
            idempotency_key="demo-review",
            user=user,
        )
        self.stdout.write(
            f"document_review run {run.pk} [{run.status}]: once its review waits in the "
            "approvals inbox, reject it with feedback to send it round again (at most 4 "
            "rounds), or approve it to publish"
        )
        run = workflows.start_run(
            "report_export",
            {"report": "monthly-sales", "polls_until_ready": 3},
            idempotency_key="demo-export",
            user=user,
        )
        self.stdout.write(
            f"report_export run {run.pk} [{run.status}]: polls its export every 10 seconds "
            "until it is ready (the third poll)"
        )
        flow = build_stock_sync(user)
        self.stdout.write(
            f"flow {flow.pk} {flow.name!r}: {len(MEMBERS)} members; once the worker has "
            "run them, its page (Flows in the admin) shows a failed feed, a member "
            "cancelled because of it, one still blocked and the rest completed; print it "
            f"with `manage.py workflows_flow show --key {KEY}`"
        )
