"""Step handlers for the benchmarks, importable by dotted path (``bench.handlers.noop``)."""

from __future__ import annotations

from typing import Any


def noop(ctx: Any) -> None:
    """Do nothing, so a step costs only the engine's own work."""
    return None


def noop_chain(name: str, steps: int, module: str, **options: Any) -> type:
    """A workflow of ``steps`` no-op tasks in a chain, declared as if in ``module``;
    ``options`` are given to every task (limits: ``rate_limit=``, ``concurrency_key=``).

    Both benchmarks measure this shape; each registers it under its own name.
    """
    from workflows import Task, Workflow

    body = {f"step_{n:02d}": Task("bench.handlers.noop", **options) for n in range(1, steps + 1)}
    return type(
        f"NoopChain{steps}",
        (Workflow,),
        {"__module__": module, "__doc__": noop_chain.__doc__, "name": name, **body},
    )
