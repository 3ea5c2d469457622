"""Handlers of the shop's checkout workflow: plain functions of the step's context."""

from __future__ import annotations

from typing import Any

from workflows.context import Context


def reserve_stock(ctx: Context) -> dict[str, Any]:
    return {"order_id": ctx.input["order_id"], "reserved": True}


def send_confirmation(ctx: Context) -> dict[str, Any]:
    reservation = ctx.steps["reserve"].output
    return {"confirmed": reservation["order_id"]}
