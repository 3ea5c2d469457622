"""Step handlers the test modules share, named by the dotted paths below, and what they
record. ``tests/conftest.py`` empties the records before every test (``reset``).

A handler particular to one test (it counts its calls, fails on a given attempt, returns
a certain value) stays in that test's module, beside the workflows that use it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from workflows import PermanentError

NOOP = f"{__name__}.noop"
WORK = f"{__name__}.work"
UNDO = f"{__name__}.undo"
ASK_BANK = f"{__name__}.ask_bank"
AWAIT_MAPPING = f"{__name__}.await_mapping"
BOOM = f"{__name__}.boom"

# Names of the steps ``work`` fails permanently (with "<step> is broken").
BROKEN: set[str] = set()
# Names of the steps ``undo`` compensated, in the order it was called.
UNDONE: list[str] = []
# The callback tokens ``ask_bank`` handed out, in order.
TOKENS: list[str] = []
# What a module's own handlers note of their calls (usually step names), in order.
CALLS: list[str] = []


def noop(ctx: Any) -> None:
    return None


def work(ctx: Any) -> str:
    """Return the step's name, or fail permanently when the step is in ``BROKEN``."""
    if ctx.step_name in BROKEN:
        raise PermanentError(f"{ctx.step_name} is broken")
    return ctx.step_name


def undo(ctx: Any) -> None:
    UNDONE.append(ctx.step_name)


def boom(ctx: Any) -> None:
    raise PermanentError("boom")


def await_mapping(ctx: Any) -> Any:
    """Await signal ``mapping`` (or ``skip``) for an hour; then output how it resumed.
    Its Task declares ``awaits=["mapping", "skip"]``."""
    from workflows import Await

    if ctx.resumed is None:
        return Await(["mapping", "skip"], timeout=timedelta(hours=1))
    return ctx.resumed


def ask_bank(ctx: Any) -> Any:
    """Park the step on a callback that expires in ten minutes; keep its token."""
    handle = ctx.await_callback(timeout=timedelta(minutes=10))
    TOKENS.append(handle.token)
    return handle


def reset() -> None:
    BROKEN.clear()
    UNDONE.clear()
    TOKENS.clear()
    CALLS.clear()
