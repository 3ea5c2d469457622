"""Handlers of the demo workflows: each computes a value or writes a DemoRecord."""

from __future__ import annotations

import time
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings

from flowsite.demo.models import DemoRecord
from workflows import Await, PermanentError
from workflows.context import Context

TAX_RATE = Decimal("0.20")
SHIPPING_PER_ITEM = Decimal("4.50")


def _record(ctx: Context, kind: str, data: dict[str, Any]) -> dict[str, Any]:
    """Write the step's record once, keyed by its idempotency key, and return its data."""
    DemoRecord.objects.update_or_create(
        idempotency_key=ctx.idempotency_key,
        defaults={"run_id": ctx.run_id, "kind": kind, "data": data},
    )
    return data


def _lines(ctx: Context) -> list[dict[str, Any]]:
    return ctx.input.get("lines", [])


def reserve_stock(ctx: Context) -> dict[str, Any]:
    skus = {line["sku"]: line["quantity"] for line in _lines(ctx)}
    return _record(ctx, "reservation", {"order": ctx.input["order_id"], "skus": skus})


def compute_tax(ctx: Context) -> str:
    subtotal = sum(Decimal(str(line["price"])) * line["quantity"] for line in _lines(ctx))
    return str((subtotal * TAX_RATE).quantize(Decimal("0.01")))


def compute_shipping(ctx: Context) -> str:
    items = sum(line["quantity"] for line in _lines(ctx))
    return str((SHIPPING_PER_ITEM * items).quantize(Decimal("0.01")))


def create_invoice(ctx: Context) -> dict[str, Any]:
    subtotal = sum(Decimal(str(line["price"])) * line["quantity"] for line in _lines(ctx))
    tax = Decimal(ctx.steps["compute_tax"].output)
    shipping = Decimal(ctx.steps["compute_shipping"].output)
    total = subtotal + tax + shipping
    return _record(
        ctx,
        "invoice",
        {
            "order": ctx.input["order_id"],
            "subtotal": str(subtotal),
            "tax": str(tax),
            "shipping": str(shipping),
            "total": str(total),
        },
    )


def wrap_gift(ctx: Context) -> dict[str, Any]:
    return _record(ctx, "gift_wrap", {"order": ctx.input["order_id"]})


def send_receipt(ctx: Context) -> dict[str, Any]:
    invoice = ctx.steps["create_invoice"].output
    return _record(
        ctx,
        "receipt",
        {"to": ctx.input.get("email", "customer@example.com"), "total": invoice["total"]},
    )


# The import goes one row at a time at a pace a person can watch, and can cancel: its
# progress bar and log lines move on the run page (and in ``manage.py workflows_tail
# RUN --follow``) for as long as its rows take (``demo_setup`` asks for 120: five
# minutes), and it heartbeats after every row, so a cancel
# stops it within a row's time. The pace is the setting DEMO_IMPORT_SECONDS_PER_ROW
# (the test settings make it 0).
SECONDS_PER_ROW = 2.5


def _seconds_per_row() -> float:
    return float(getattr(settings, "DEMO_IMPORT_SECONDS_PER_ROW", SECONDS_PER_ROW))


def import_batch(ctx: Context) -> dict[str, Any]:
    """Fails on its first two attempts (a flaky upstream), then imports the batch row by
    row, reporting its progress, heartbeating (where a cancel stops it: ``RunCancelled``),
    logging every fifth row and keeping a summary."""
    rows = ctx.input.get("rows", 10)
    pace = _seconds_per_row()
    ctx.log(f"attempt {ctx.attempt}: connecting to the upstream feed")
    if ctx.attempt < 3:
        ctx.log("upstream feed unavailable", stream="stderr")
        raise ConnectionError(f"upstream feed unavailable (attempt {ctx.attempt})")
    ctx.summary({"rows": rows, "imported": 0})
    for row in range(1, rows + 1):
        time.sleep(pace)
        ctx.progress(row, rows, f"importing row {row} of {rows}")
        if row % 5 == 0 or row == rows:
            ctx.log(f"imported rows 1-{row}")
            ctx.summary({"imported": row})
        ctx.heartbeat()
    return _record(ctx, "import", {"rows": rows, "attempts": ctx.attempt})


# The catalogue fields the shop knows; a file's other columns need a mapping decision.
CATALOGUE_FIELDS = frozenset({"sku", "name", "price", "quantity", "colour", "size"})


def import_catalogue(ctx: Context) -> Any:
    """Import a catalogue file's columns; on columns the shop does not know, await a
    person's mapping decision (signal ``mapping``, a day at most) and run again with it.

    A mapping is ``{"column": "field"}`` (``null``: drop the column); a field the shop
    does not know either is refused for good. Without an answer in time the unknown
    columns are dropped.
    """
    columns = [str(column) for column in ctx.input["columns"]]
    unknown = [column for column in columns if column not in CATALOGUE_FIELDS]
    if unknown and ctx.resumed is None:
        ctx.log(f"unknown columns {', '.join(unknown)}: asking for a mapping")
        return Await("mapping", timeout=timedelta(days=1))
    answer = (ctx.resumed or {}).get("payload")
    mapping = answer if isinstance(answer, dict) else {}
    wrong = sorted(
        {str(field) for field in mapping.values() if field is not None} - CATALOGUE_FIELDS
    )
    if wrong:
        raise PermanentError(f"the mapping names fields the shop does not know: {wrong}")
    fields = {
        column: column if column in CATALOGUE_FIELDS else mapping.get(column) for column in columns
    }
    return _record(
        ctx,
        "catalogue_import",
        {
            "supplier": ctx.input["supplier"],
            "fields": {column: field for column, field in fields.items() if field is not None},
            "dropped": [column for column, field in fields.items() if field is None],
        },
    )


def hold_stock(ctx: Context) -> dict[str, Any]:
    return _record(
        ctx, "stock_hold", {"order": ctx.input["order_id"], "parcels": len(_parcels(ctx))}
    )


def release_stock(ctx: Context) -> None:
    """Compensation of hold_stock: give the held stock back."""
    _record(
        ctx, "stock_released", {"order": ctx.input["order_id"], "undoes": ctx.compensated_output}
    )


def _parcels(ctx: Context) -> list[dict[str, Any]]:
    return ctx.input.get("parcels", [])


def pack_parcel(ctx: Context) -> dict[str, Any]:
    parcel = ctx.item
    return _record(ctx, "parcel_packed", {"parcel": parcel["id"], "weight_kg": parcel["weight_kg"]})


def unpack_parcel(ctx: Context) -> None:
    """Compensation of pack_parcel: put the parcel's items back on the shelf."""
    _record(ctx, "parcel_unpacked", {"parcel": ctx.item["id"]})


def charge_card(ctx: Context) -> dict[str, Any]:
    if ctx.input.get("card") == "declined":
        raise PermanentError("card declined by the issuer")
    method = ctx.steps["approval"].output["selections"][0]
    return _record(ctx, "charge", {"order": ctx.input["order_id"], "shipping": method})


# Tokens the demo's pretend model uses per word of the article.
TOKENS_PER_WORD = Decimal("1.3")


def summarise_article(ctx: Context) -> dict[str, Any]:
    """Pretend to call a metered model: report the tokens it used against the budgets."""
    tokens = int(ctx.input["words"] * TOKENS_PER_WORD)
    ctx.report_usage("tokens", tokens)
    return _record(ctx, "summary", {"title": ctx.input["title"], "tokens": tokens})


def publish_summary(ctx: Context) -> dict[str, Any]:
    review = ctx.steps["reviewed"].output or {}
    return _record(
        ctx, "published", {"title": ctx.input["title"], "editor": review.get("editor", "?")}
    )


def draft_document(ctx: Context) -> dict[str, Any]:
    """Write this round's draft; from round 2 on, it answers the last review's feedback."""
    last_review = ctx.steps["review"].output
    answers = last_review["feedback"] if last_review else ""
    return _record(
        ctx,
        "draft",
        {"title": ctx.input["title"], "round": ctx.iteration, "answers": answers},
    )


def publish_document(ctx: Context) -> dict[str, Any]:
    draft = ctx.steps["draft"].output
    return _record(
        ctx,
        "document_published",
        {"title": draft["title"], "rounds": draft["round"], "by": ctx.steps["review"].output["by"]},
    )


def request_export(ctx: Context) -> dict[str, Any]:
    """Pretend to ask an outside reporting system for an export: it answers with a job id."""
    return _record(ctx, "export_requested", {"report": ctx.input["report"], "job": ctx.run_id.hex})


def check_export(ctx: Context) -> dict[str, Any]:
    """One poll of the pretend export job: ready once it was asked ``polls_until_ready``
    times (``ctx.iteration`` is the poll's number)."""
    return {"poll": ctx.iteration, "ready": ctx.iteration >= ctx.input["polls_until_ready"]}


def deliver_export(ctx: Context) -> dict[str, Any]:
    polls = ctx.steps["wait_until_ready"].output["poll"]
    return _record(ctx, "export_delivered", {"report": ctx.input["report"], "polls": polls})


# The stock each supplier's pretend feed lists: a few SKUs and their counts.
SUPPLIER_STOCK = {
    "acme": {"BOOK-42": 120, "MUG-7": 40},
    "globex": {"MUG-7": 25, "LAMP-3": 8},
    "initech": {"DESK-1": 4},
}


def fetch_feed(ctx: Context) -> dict[str, Any]:
    """Fetch a supplier's stock; a feed marked retired fails for good (no retry helps)."""
    supplier = ctx.input["supplier"]
    if ctx.input.get("feed") == "retired":
        raise PermanentError(f"{supplier}'s stock feed was retired: the supplier answers 410 Gone")
    stock = SUPPLIER_STOCK.get(supplier, {})
    return _record(ctx, "stock_feed", {"supplier": supplier, "stock": stock})


def count_stock(ctx: Context) -> dict[str, Any]:
    """The units each listed supplier has in stock, for the slot that started the run."""
    counts = {
        supplier: sum(SUPPLIER_STOCK.get(supplier, {}).values())
        for supplier in ctx.input.get("suppliers", [])
    }
    return _record(ctx, "stock_check", {"units": counts, "total": sum(counts.values())})


def apply_stock(ctx: Context) -> dict[str, Any]:
    """Add up the stock of the upstream feeds that completed (under an ``any`` join some
    may not have) and apply it to the input's target."""
    totals: dict[str, int] = {}
    feeds = []
    for member, upstream in sorted(ctx.upstream.items()):
        if upstream.status != "completed" or "fetch" not in (upstream.output or {}):
            continue
        feeds.append(member)
        for sku, count in upstream.output["fetch"]["stock"].items():
            totals[sku] = totals.get(sku, 0) + count
    return _record(
        ctx, "stock_applied", {"target": ctx.input["target"], "from": feeds, "stock": totals}
    )
