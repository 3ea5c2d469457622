"""Request bodies shown in the OpenAPI document, runnable against the demo project.

Each names a workflow, step or option of ``flowsite.demo.flows`` (``order_fulfilment``,
``warehouse_dispatch``) with the input its ``clean_input`` and its steps need, so that
"Try it out" against the demo site does what it says. A project's own workflows take
their own input; the shapes stay the same. ``tests/api/test_examples.py`` sends them.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample

START_ORDER = {
    "workflow": "order_fulfilment",
    "input": {
        "order_id": "ORD-1001",
        "lines": [
            {"sku": "MUG-01", "quantity": 2, "price": "12.50"},
            {"sku": "TEA-07", "quantity": 1, "price": "6.90"},
        ],
        "gift": True,
        "email": "ada@example.com",
    },
    "business_key": "ORD-1001",
    "variables": {"channel": "web"},
}
START_DISPATCH = {
    "workflow": "warehouse_dispatch",
    "input": {
        "order_id": "ORD-1002",
        "parcels": [{"id": "P-1", "weight_kg": 1.5}, {"id": "P-2", "weight_kg": 0.8}],
    },
    "business_key": "ORD-1002",
    "priority": 100,
}
CANCEL = {"reason": "duplicate order", "compensate": False}
REASON = {"reason": "maintenance window"}
RERUN = {"from_step": "create_invoice", "reason": "tax table fixed"}
PRIORITY = {"priority": 200}
BUSINESS_KEY = {"business_key": "ORDER-1042"}
SKIP = {"output": {"reference": "entered by hand"}}
REVOKE = {"attempt": 3, "reason": "worker wedged on a hung connection"}
REVOKE_ITEM = {"item": "P-2", "attempt": 1, "reason": "worker wedged"}
APPROVE = {"selections": ["express"], "feedback": "customer pays for express"}
REJECT = {"feedback": "out of stock"}
RAISE_BUDGET = {"limit": "80000"}
CREATE_BUDGET = {
    "workflow": "order_fulfilment",
    "dimension": "tokens",
    "limit": "50000",
    "per": "business_key",
    "period_seconds": 86400,
    "on_exhausted": "hold",
}
CREATE_BUDGET_FAIL = {
    "workflow": "order_fulfilment",
    "dimension": "usd",
    "limit": 250,
    "on_exhausted": "fail",
}
REPORT_USAGE = {
    "workflow": "order_fulfilment",
    "dimension": "tokens",
    "amount": "1200",
    "scope_key": "customer-42",
}


def request_examples(*bodies: tuple[str, dict[str, Any]]) -> list[OpenApiExample]:
    """``extend_schema(examples=...)`` entries: each (summary, body) as a request example."""
    return [OpenApiExample(summary, value=body, request_only=True) for summary, body in bodies]
