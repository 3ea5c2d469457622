"""Threads and waits that fail instead of hanging: calls released together at a barrier,
a condition polled until true, the sweeper run until a condition holds. Every thread closes
its database connections, so that the test database can be dropped."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.db import connections

THREAD_TIMEOUT_SECONDS = 60


def run_concurrently(*calls: Callable[[], Any]) -> list[Any]:
    """Run each call in its own thread, released together by a barrier.

    Returns each call's result, or the exception it raised. Every thread closes its
    database connection so test databases can be torn down; a deadlock fails the test
    after ``THREAD_TIMEOUT_SECONDS`` instead of hanging it.
    """
    barrier = threading.Barrier(len(calls), timeout=THREAD_TIMEOUT_SECONDS)

    def wrapped(call: Callable[[], Any]) -> Any:
        try:
            barrier.wait()
            return call()
        except Exception as exc:
            return exc
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = [pool.submit(wrapped, call) for call in calls]
        return [future.result(timeout=THREAD_TIMEOUT_SECONDS) for future in futures]


def eventually(
    done: Callable[[], bool],
    *,
    timeout: float = THREAD_TIMEOUT_SECONDS,
    every: float = 0.01,
) -> bool:
    """Whether ``done()`` became true within ``timeout`` seconds (looked at every
    ``every`` seconds, 10 ms unless told)."""
    give_up_at = time.monotonic() + timeout
    while not done():
        if time.monotonic() > give_up_at:
            return False
        time.sleep(every)
    return True


def sweeper_until(done: Callable[[], bool], *, timeout: float = THREAD_TIMEOUT_SECONDS) -> None:
    """Run the sweeper in a thread (``workflows.testing.sweeper_running``) until
    ``done()`` (or ``timeout`` seconds), then stop it; fail if it does not stop. The
    thread closes its database connection so the test database can be dropped."""
    from workflows.testing import sweeper_running

    with sweeper_running():
        eventually(done, timeout=timeout)


def once_watched(topic: str, verb: Callable[[], Any]) -> Any:
    """Call ``verb`` once a waiter of this process watches ``topic`` (a long poll
    watches before its first read, then waits)."""
    from workflows.engine.wakeups.local import watchers

    eventually(lambda: watchers(topic) > 0)
    return verb()
