"""Where each loop and polling task of a run stands: read from the registered
definition and the rows already read, at no query."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

from workflows.definitions import Loop, Task
from workflows.queries.explain.reading import Reading
from workflows.status import TimerKind

__all__ = ["loops"]


def loops(reading: Reading, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Where each loop node and polling task stands, from the registered definition
    (none without one) and the step rows: ``kind`` (``loop`` or ``poll``), ``loop``
    (its step), ``status``, ``back_to`` and ``body`` (a poll's are itself),
    ``iteration`` (a loop node's: the round its body is in; a poll's: its iteration),
    ``max_iterations``, ``on_exhausted``, ``every_seconds`` and ``next_poll_at`` (a
    poll's pause and its scheduled ``repeat`` timer; ``None`` for a loop node), and
    ``ends_when``, in words."""
    workflow = reading.workflow
    if workflow is None:
        return []
    rows = {step["name"]: step for step in steps}
    entries = []
    for name, node in workflow.nodes.items():
        row = rows.get(name)
        if row is None:
            continue
        if isinstance(node, Loop):
            reached_after = " and ".join(workflow.graph.upstream[name]) or name
            entries.append(
                _loop_entry(
                    "loop",
                    row,
                    node.back_to,
                    workflow.graph.loop_bodies[name],
                    node.max_iterations,
                    node.on_exhausted,
                    f"{reached_after} ends and {_condition(node.while_, 'its go-again condition')} "
                    "no longer holds",
                )
            )
        elif isinstance(node, Task) and node.repeat_until is not None:
            entry = _loop_entry(
                "poll",
                row,
                name,
                (name,),
                node.max_iterations,
                node.on_exhausted,
                f"an iteration ends and {_condition(node.repeat_until, 'its done condition')} "
                "holds",
            )
            entry["every_seconds"] = node.every.total_seconds() if node.every else 0.0
            entry["next_poll_at"] = reading.timeouts.get((row["id"], TimerKind.REPEAT))
            entries.append(entry)
    return entries


def _condition(condition: Callable[..., Any], unnamed: str) -> str:
    """A loop's or a poll's condition in words, never the parameter that holds it: the
    first line of its function's docstring, else its function's name in words
    (``needs_review`` → “needs review”), else (a lambda, a callable object) ``unnamed``."""
    if not inspect.isfunction(condition) or condition.__name__ == "<lambda>":
        return unnamed
    doc = inspect.getdoc(condition)
    if doc:
        return f"“{doc.splitlines()[0].rstrip('.')}”"
    return f"“{condition.__name__.replace('_', ' ').strip()}”"


def _loop_entry(
    kind: str,
    row: dict[str, Any],
    back_to: str,
    body: Iterable[str],
    max_iterations: int | None,
    on_exhausted: str,
    condition: str,
) -> dict[str, Any]:
    then = "the run fails" if on_exhausted == "fail" else "the run goes on"
    bound = f", or after {max_iterations} iterations (then {then})"
    return {
        "kind": kind,
        "loop": row["name"],
        "status": row["status"],
        "back_to": back_to,
        "body": list(body),
        "iteration": row["iteration"],
        "max_iterations": max_iterations,
        "on_exhausted": on_exhausted,
        "every_seconds": None,
        "next_poll_at": None,
        "ends_when": condition + (bound if max_iterations is not None else ""),
    }
