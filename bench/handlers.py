"""Step handlers for the benchmarks, importable by dotted path (``bench.handlers.noop``)."""

from __future__ import annotations

from typing import Any


def noop(ctx: Any) -> None:
    """Do nothing, so a step costs only the engine's own work."""
    return None
