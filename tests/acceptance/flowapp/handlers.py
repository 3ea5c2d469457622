"""Handlers of the acceptance workflows.

Each first records the call (process, attempt, idempotency key) and then does what the
test scenario needs: pause, fail on purpose, wait to be released, or kill its own
worker. Effects go through :func:`apply_effect`, keyed by the step's idempotency key.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import F

from tests.acceptance.flowapp.models import HandlerCall, LedgerEntry, SharedCounter, SideEffect
from workflows import Await, LeaseLost
from workflows.context import Context

HEARTBEAT_EVERY_SECONDS = 0.5
DEFAULT_HOLD_SECONDS = 8.0  # below the queue's task timeout, so django-q2 never kills a hold


# Directories under the processes' FLOWSITE_VAR_DIR, shared with the tests:
# RELEASE_DIR/<run id> lets a held attempt go on (see :func:`hold`), BUSY_DIR/<pid>
# exists while that process is inside a handler (see :func:`handling`), STALL_DIR/<run
# id> names the process evaluating a stalling condition (see :func:`stall`),
# WRITTEN_DIR/<run id>/<attempt> names the process whose transactional handler has
# written its (not yet committed) row (see :func:`ledger`).
RELEASE_DIR = "release"
BUSY_DIR = "busy"
STALL_DIR = "stall"
WRITTEN_DIR = "written"
# The dotted paths of the handlers that only record their call (a step, a compensation).
RECORDED = f"{__name__}.recorded"
COMPENSATED = f"{__name__}.compensated"


def var_path(*parts: Any) -> Path:
    return Path(settings.VAR_DIR, *map(str, parts))


@contextmanager
def handling(ctx: Context) -> Iterator[None]:
    """Record the call, and mark this process as inside a handler until the block ends.

    The chaos test kills only marked workers (``Stack.kill_random_worker`` says why); the
    marker holds the attempt, so that the kills spare a step's later attempts.
    """
    record_call(ctx)
    marker = var_path(BUSY_DIR, os.getpid())
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(str(ctx.attempt))
    try:
        yield
    finally:
        marker.unlink(missing_ok=True)


def record_call(ctx: Context, note: str = "") -> None:
    HandlerCall.objects.create(
        run_id=ctx.run_id,
        step_name=ctx.step_name,
        attempt=ctx.attempt,
        idempotency_key=ctx.idempotency_key,
        pid=os.getpid(),
        note=note,
    )


def apply_effect(ctx: Context) -> None:
    """Perform the step's external effect once per idempotency key (later keys are ignored)."""
    effect = SideEffect(
        idempotency_key=ctx.idempotency_key,
        run_id=ctx.run_id,
        step_name=ctx.step_name,
        attempt=ctx.attempt,
        pid=os.getpid(),
    )
    SideEffect.objects.bulk_create([effect], ignore_conflicts=True)


def output(ctx: Context) -> dict[str, Any]:
    return {"step": ctx.step_name, "attempt": ctx.attempt, "pid": os.getpid()}


def recorded(ctx: Context) -> dict[str, Any]:
    """A step that records its call and returns at once (no pause, no effect)."""
    record_call(ctx)
    return output(ctx)


def compensated(ctx: Context) -> None:
    """A compensation that records its call, noted ``compensated``."""
    record_call(ctx, note="compensated")


def pause(ctx: Context, seconds: float) -> None:
    """Sleep like a slow handler would, heartbeating so a long pause keeps its lease."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, HEARTBEAT_EVERY_SECONDS))
        if seconds > HEARTBEAT_EVERY_SECONDS and time.monotonic() < deadline:
            ctx.heartbeat()


def work(ctx: Context) -> dict[str, Any]:
    """An ordinary step: record, pause for ``input["pause"] = [low, high]`` seconds, effect."""
    with handling(ctx):
        low, high = ctx.input.get("pause", (0, 0))
        pause(ctx, random.uniform(low, high))
        apply_effect(ctx)
        return output(ctx)


def flaky(ctx: Context) -> dict[str, Any]:
    """Fail the first ``input["failures"]`` attempts (default 1), then behave like :func:`work`."""
    with handling(ctx):
        if ctx.attempt <= ctx.input.get("failures", 1):
            raise RuntimeError(f"planned failure of attempt {ctx.attempt}")
        apply_effect(ctx)
        return output(ctx)


def hold(ctx: Context) -> dict[str, Any]:
    """Block the attempts listed in ``input["hold_attempts"]`` until the test releases them.

    With ``input["heartbeat_after_hold"]`` the released attempt heartbeats, and when that
    is rejected it goes on regardless, like a handler that ignores the warning: the
    engine must then reject its result too.
    """
    record_call(ctx)
    if ctx.attempt in ctx.input.get("hold_attempts", [1]):
        wait_for_release(ctx)
        if ctx.input.get("heartbeat_after_hold"):
            try:
                ctx.heartbeat()
            except LeaseLost:
                record_call(ctx, note="heartbeat rejected")
    apply_effect(ctx)
    return output(ctx)


def reports_then_holds(ctx: Context) -> dict[str, Any]:
    """Log three lines, report progress and patch the summary, flush them with a
    heartbeat, then record the call and block when the attempt is in
    ``input["hold_attempts"]`` (the test kills the worker there): whatever the record
    shows, the attempt's telemetry committed before it."""
    for line in range(3):
        ctx.log(f"attempt {ctx.attempt} line {line}")
    ctx.progress(ctx.attempt, 2, f"attempt {ctx.attempt}")
    ctx.summary({f"attempt_{ctx.attempt}": True})
    ctx.heartbeat()
    return hold(ctx)


def wait_for_release(ctx: Context) -> None:
    """Block until the test creates the run's release file, or ``input["hold_seconds"]``."""
    deadline = time.monotonic() + ctx.input.get("hold_seconds", DEFAULT_HOLD_SECONDS)
    while not var_path(RELEASE_DIR, ctx.run_id).exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def ledger(ctx: Context) -> dict[str, Any]:
    """A transactional step: write the host's row, then what the test plans for the attempt.

    The row commits only with the step's completion. After writing, the handler marks
    WRITTEN_DIR/<run id>/<attempt>, then with ``attempt`` in ``input["die_attempts"]``
    kills its own worker (a crash between the write and the completion), or with it in
    ``input["hold_attempts"]`` waits to be released (a worker that stalls with its write
    pending while its lease runs out).
    """
    LedgerEntry.objects.create(
        run_id=ctx.run_id, step_name=ctx.step_name, attempt=ctx.attempt, pid=os.getpid()
    )
    marker = var_path(WRITTEN_DIR, ctx.run_id, ctx.attempt)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(str(os.getpid()))
    if ctx.attempt in ctx.input.get("die_attempts", []):
        os.kill(os.getpid(), signal.SIGKILL)
    if ctx.attempt in ctx.input.get("hold_attempts", []):
        wait_for_release(ctx)
    return output(ctx)


def batch_item(ctx: Context) -> dict[str, Any]:
    """An item of a batched fan-out: record, effect, output. The first attempt of an item
    listed in ``input["die_on"]`` kills its own worker after recording the call, so the
    items before it in the batch have run and made their effects, the ones after have not.
    """
    record_call(ctx)
    if ctx.attempt == 1 and str(ctx.item) in ctx.input.get("die_on", []):
        os.kill(os.getpid(), signal.SIGKILL)
    apply_effect(ctx)
    return {"item": ctx.item, **output(ctx)}


def die(ctx: Context) -> None:
    """Kill this handler's own worker process, as an out-of-memory kill would."""
    record_call(ctx)
    os.kill(os.getpid(), signal.SIGKILL)


def count(ctx: Context) -> dict[str, Any]:
    """Increment the shared counter ``input["counter"]`` once per call."""
    record_call(ctx)
    SharedCounter.objects.filter(name=ctx.input["counter"]).update(value=F("value") + 1)
    apply_effect(ctx)
    return output(ctx)


def stall(ctx: Context) -> bool:
    """A ``when=`` condition that takes ``input["stall_seconds"]`` to answer yes.

    Conditions run inside the transition that releases their step, which holds the
    run's lock: the test freezes this process here, as a pause of the process (GC, swap,
    a stopped VM) would freeze it in the middle of any transition.
    """
    path = var_path(STALL_DIR, ctx.run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(str(os.getpid()))
    time.sleep(ctx.input.get("stall_seconds", 1.0))
    return True


def await_mapping(ctx: Context) -> Any:
    """Record the call; await ``mapping`` on a first run, else output what resumed it."""
    record_call(ctx)
    if ctx.resumed is None:
        return Await("mapping")
    return {"resumed": ctx.resumed, "attempt": ctx.attempt}
