"""Demo workflows, discovered by Flowsite's autodiscovery of ``flows`` modules."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from django.conf import settings

from workflows import (
    FanOut,
    Gate,
    InvalidInput,
    Loop,
    Option,
    Retry,
    Schedule,
    Sleep,
    Task,
    WaitForSignal,
    Workflow,
)
from workflows.definitions import Budget


class OrderFulfilment(Workflow):
    """Reserve stock, price the order in two parallel branches, invoice, cool off, notify.

    Shows a sequence, a parallel split and join, a durable sleep, a retry policy and
    ``when=`` conditions (gift wrapping is skipped unless asked for).
    """

    name = "order_fulfilment"
    version = 1
    input_example = {
        "order_id": "A-1003",
        "email": "grace@example.com",
        "gift": False,
        "lines": [{"sku": "BOOK-42", "quantity": 1, "price": "12.50"}],
    }

    reserve_stock = Task(
        "flowsite.demo.steps.reserve_stock",
        retry=Retry(max_attempts=5, initial_interval=timedelta(seconds=1), backoff=2.0),
    )
    compute_tax = Task("flowsite.demo.steps.compute_tax", after=["reserve_stock"])
    compute_shipping = Task("flowsite.demo.steps.compute_shipping", after=["reserve_stock"])
    create_invoice = Task(
        "flowsite.demo.steps.create_invoice", after=["compute_tax", "compute_shipping"]
    )
    wrap_gift = Task(
        "flowsite.demo.steps.wrap_gift",
        after=["create_invoice"],
        when=lambda ctx: bool(ctx.input.get("gift")),
    )
    cool_off = Sleep(timedelta(seconds=30), after=["create_invoice"])
    send_receipt = Task(
        "flowsite.demo.steps.send_receipt",
        after=["cool_off", "wrap_gift"],
        when=lambda ctx: Decimal(ctx.steps["create_invoice"].output["total"]) > 0,
    )

    @classmethod
    def clean_input(cls, data: dict) -> dict:
        if not data.get("order_id"):
            raise InvalidInput("order_fulfilment needs an 'order_id'")
        for line in data.get("lines", []):
            if not {"sku", "quantity", "price"} <= set(line):
                raise InvalidInput(f"order line {line!r} needs sku, quantity and price")
        return data


class FlakyImport(Workflow):
    """A task that fails twice before it succeeds: retries with exponential backoff; the
    attempt that succeeds imports its rows slowly, reporting progress and logging (watch
    it on the run page or with ``manage.py workflows_tail RUN --follow``)."""

    name = "flaky_import"
    version = 1
    input_example = {"rows": 25}

    import_batch = Task(
        "flowsite.demo.steps.import_batch",
        retry=Retry(max_attempts=4, initial_interval=timedelta(seconds=2), backoff=2.0),
    )
    settle = Sleep(timedelta(seconds=5))


class CatalogueImport(Workflow):
    """Import a supplier's catalogue file. Columns the shop does not know stop the import
    mid-step: its handler asks for a mapping decision (``Await("mapping")``) and runs
    again with the answer, e.g. ``{"colour_code": "colour"}`` (a column mapped to
    ``null`` is dropped), or after a day drops the columns nobody mapped."""

    name = "catalogue_import"
    version = 1
    input_example = {"supplier": "acme", "columns": ["sku", "name", "price", "colour_code"]}

    import_file = Task(
        "flowsite.demo.steps.import_catalogue",
        awaits=["mapping"],
        retry=Retry(max_attempts=3, initial_interval=timedelta(seconds=2)),
    )

    @classmethod
    def clean_input(cls, data: dict) -> dict:
        columns = data.get("columns")
        if not data.get("supplier") or not isinstance(columns, list) or not columns:
            raise InvalidInput("catalogue_import needs a 'supplier' and a list of 'columns'")
        return data


class WarehouseDispatch(Workflow):
    """Hold stock, wait for a dispatcher's approval, pack parcels in parallel, print the
    shipping label, cool off, charge. A declined card fails the run, which then undoes
    the packing and the stock hold in reverse order (Saga compensation).

    ``print_label`` is an external step: no Python handler; the bundled label printer
    (``flowsite/label_printer.py``, started by ``make run``) claims it over
    ``/api/work/`` as a service in any language would."""

    name = "warehouse_dispatch"
    version = 1
    input_example = {
        "order_id": "W-2003",
        "card": "valid",
        "parcels": [{"id": "P1", "weight_kg": 1.5}, {"id": "P2", "weight_kg": 0.4}],
    }

    hold_stock = Task(
        "flowsite.demo.steps.hold_stock", compensate="flowsite.demo.steps.release_stock"
    )
    approval = Gate(
        prompt="Dispatch order {input[order_id]} ({steps[hold_stock][parcels]} parcels)?",
        options=[Option("standard", "Standard"), Option("express", "Express")],
        min_selections=1,
        max_selections=1,
        timeout=timedelta(days=2),
        on_timeout="reject",
        permission="demo.approve_dispatch",
    )
    pack = FanOut(
        "flowsite.demo.steps.pack_parcel",
        items=lambda ctx: ctx.input["parcels"],
        key=lambda parcel: parcel["id"],
        max_parallel=3,
        compensate="flowsite.demo.steps.unpack_parcel",
    )
    print_label = Task(
        external=True,
        queue="labels",
        retry=Retry(max_attempts=3, initial_interval=timedelta(seconds=2)),
        timeout=timedelta(seconds=30),
    )
    cool_off = Sleep(timedelta(seconds=20))
    charge = Task("flowsite.demo.steps.charge_card", retry=Retry(max_attempts=1))

    @classmethod
    def clean_input(cls, data: dict) -> dict:
        if not data.get("order_id") or not data.get("parcels"):
            raise InvalidInput("warehouse_dispatch needs an 'order_id' and a list of 'parcels'")
        for parcel in data["parcels"]:
            if not {"id", "weight_kg"} <= set(parcel):
                raise InvalidInput(f"parcel {parcel!r} needs an id and a weight_kg")
        return data


class ArticleSummary(Workflow):
    """Summarise an article with a metered model, wait for an editor's "reviewed"
    signal, publish. Shows a usage budget (tokens per customer, the run's business key,
    and per day for the whole workflow) and a step waiting for a signal.

    A customer's runs that use up its budget hold their next steps until an operator
    raises or resets it on the Budgets page; send the signal from the run page's "Send
    a signal" or with manage.py workflows_signal.
    """

    name = "article_summary"
    version = 1
    input_example = {"title": "Durable workflows in Django", "words": 1200}
    budgets = [
        Budget("tokens", 2_000, per="business_key"),
        Budget("tokens", 20_000, period=timedelta(days=1)),
    ]

    summarise = Task("flowsite.demo.steps.summarise_article")
    reviewed = WaitForSignal("reviewed", timeout=timedelta(days=1))
    publish = Task("flowsite.demo.steps.publish_summary")

    @classmethod
    def clean_input(cls, data: dict) -> dict:
        words = data.get("words")
        if not data.get("title") or not isinstance(words, int) or words < 1:
            raise InvalidInput("article_summary needs a 'title' and a positive number of 'words'")
        return data


class DocumentReview(Workflow):
    """Draft a document, have it reviewed, revise it while the reviewer asks for changes,
    publish. Shows a ``Loop``: a rejection in the approvals inbox ("Request changes")
    sends the run back to ``draft`` for another round, whose draft answers the review's
    feedback; after four rounds without approval the run fails with
    ``max_iterations_exceeded``.
    """

    name = "document_review"
    version = 1
    input_example = {"title": "Expense policy", "author": "ada"}

    draft = Task("flowsite.demo.steps.draft_document")
    review = Gate(
        prompt="Review {input[title]}, draft of round {steps[draft][round]}: publish it?",
        on_reject="continue",
        timeout=timedelta(days=3),
    )
    revise = Loop(
        back_to="draft",
        while_=lambda ctx: ctx.steps["review"].output["decision"] == "rejected",
        max_iterations=4,
    )
    publish = Task("flowsite.demo.steps.publish_document")

    @classmethod
    def clean_input(cls, data: dict) -> dict:
        if not data.get("title"):
            raise InvalidInput("document_review needs a 'title'")
        return data


class ReportExport(Workflow):
    """Ask an outside system for a report export, then poll it every ten seconds until it
    is ready, at most twelve times, and deliver it. Shows a polling ``Task``: between two
    polls the step waits on a durable timer, not in a sleeping worker.
    """

    name = "report_export"
    version = 1
    input_example = {"report": "monthly-sales", "polls_until_ready": 3}

    request_export = Task("flowsite.demo.steps.request_export")
    wait_until_ready = Task(
        "flowsite.demo.steps.check_export",
        repeat_until=lambda ctx: ctx.steps["wait_until_ready"].output["ready"],
        every=timedelta(seconds=10),
        max_iterations=12,
    )
    deliver = Task("flowsite.demo.steps.deliver_export")

    @classmethod
    def clean_input(cls, data: dict) -> dict:
        polls = data.get("polls_until_ready")
        if not data.get("report") or not isinstance(polls, int) or polls < 1:
            raise InvalidInput(
                "report_export needs a 'report' and a positive number of 'polls_until_ready'"
            )
        return data


class SupplierFeed(Workflow):
    """Fetch one supplier's stock feed: a member of the demo's stock sync flow
    (:mod:`flowsite.demo.stock_sync`). A feed the input marks ``"retired"`` fails at
    once, every time, so the flow shows a failed member and what it holds back.
    """

    name = "supplier_feed"
    version = 1
    input_example = {"supplier": "acme"}

    fetch = Task("flowsite.demo.steps.fetch_feed")

    @classmethod
    def clean_input(cls, data: dict) -> dict:
        if not data.get("supplier"):
            raise InvalidInput("supplier_feed needs a 'supplier'")
        return data


class StockUpdate(Workflow):
    """Apply the stock that a flow member's completed upstream feeds fetched to one
    ``target`` (the warehouse, the shop's prices, ...): the other members of the demo's
    stock sync flow. Outside a flow it has no feeds and applies nothing."""

    name = "stock_update"
    version = 1
    input_example = {"target": "warehouse"}

    apply = Task("flowsite.demo.steps.apply_stock")

    @classmethod
    def clean_input(cls, data: dict) -> dict:
        if not data.get("target"):
            raise InvalidInput("stock_update needs a 'target'")
        return data


STOCK_CHECK_SCHEDULE = Schedule.every(
    timedelta(minutes=2), key="demo-stock-check", input={"suppliers": ["acme", "globex"]}
)
"""The demo's run schedule: a stock check every two minutes, so a new user of ``make run``
sees a schedule fire (Schedules in the admin, ``manage.py workflows_schedule list``)."""


class StockCheck(Workflow):
    """Count the stock the suppliers' feeds report: a small, quick run that the demo's
    schedule starts every two minutes. The test settings declare no schedule
    (``DEMO_SCHEDULES``): every test that moves the clock on would otherwise fire it."""

    name = "stock_check"
    version = 1
    input_example = {"suppliers": ["acme"]}
    schedules = [STOCK_CHECK_SCHEDULE] if getattr(settings, "DEMO_SCHEDULES", True) else []

    count = Task("flowsite.demo.steps.count_stock")
