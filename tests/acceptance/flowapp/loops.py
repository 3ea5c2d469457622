"""The loop acceptance workflow and its handler: a body of two steps that goes round
three times, whose second step holds in the second iteration's first attempt (the test
kills that worker there). Each call records its iteration in ``HandlerCall.note``."""

from __future__ import annotations

from typing import Any

from tests.acceptance.flowapp.flows import HOLD_TIMEOUT, LEASE
from tests.acceptance.flowapp.handlers import output, record_call, wait_for_release
from tests.acceptance.flowapp.models import HandlerCall
from workflows import Loop, Retry, Task, Workflow
from workflows.context import Context

HERE = "tests.acceptance.flowapp.loops"
ROUNDS = 3
HELD_ITERATION = 2


def iteration_note(ctx: Context) -> str:
    return f"iteration {ctx.iteration}"


def step(ctx: Context) -> dict[str, Any]:
    record_call(ctx, note=iteration_note(ctx))
    return {**output(ctx), "iteration": ctx.iteration}


def held_once(ctx: Context) -> dict[str, Any]:
    """Hold the first attempt of the second iteration (until the test releases the run
    or kills the worker); every other call goes straight through."""
    record_call(ctx, note=iteration_note(ctx))
    first = HandlerCall.objects.filter(idempotency_key=ctx.idempotency_key).count() == 1
    if ctx.iteration == HELD_ITERATION and first:
        wait_for_release(ctx)
    return {**output(ctx), "iteration": ctx.iteration}


def another_round(ctx: Context) -> bool:
    return ctx.iteration < ROUNDS


class LoopCrash(Workflow):
    """Prepare, then fetch and process three times, then finish."""

    name = "acceptance_loop_crash"

    prepare = Task(f"{HERE}.step", timeout=LEASE)
    fetch = Task(f"{HERE}.step", timeout=LEASE)
    process = Task(f"{HERE}.held_once", timeout=HOLD_TIMEOUT, retry=Retry(max_attempts=3))
    again = Loop(back_to="fetch", while_=another_round, max_iterations=5)
    finish = Task(f"{HERE}.step", timeout=LEASE)
