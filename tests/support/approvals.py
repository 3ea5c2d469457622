"""A dispatch waiting for an approver, for the tests of the pages and links approvers use:
a gate choosing one of two shipping options, guarded by ``demo.approve_dispatch``, and
the step after it that ships what was chosen."""

from __future__ import annotations

from typing import Any

from workflows import Gate, Option

SHIP = f"{__name__}.ship"


def ship(ctx: Any) -> dict[str, Any]:
    return {"shipped": ctx.steps["gate"].output["selections"]}


def dispatch_gate(prompt: str = "Dispatch order {input[order]}?", **options: Any) -> Gate:
    """A gate (to name ``gate``) choosing standard or express shipping, decided by whoever
    holds ``demo.approve_dispatch``; ``options`` add to the gate's (a timeout, ...)."""
    return Gate(
        prompt=prompt,
        options=[Option("standard", "Standard"), Option("express", "Express")],
        min_selections=1,
        max_selections=1,
        permission="demo.approve_dispatch",
        **options,
    )
