"""The same engine with django-q2 on Redis: messages are sent on commit, not in the transaction."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from django_q.models import OrmQ, Task as QueueTask

from tests.acceptance.invariants import completion_problems, idempotency_problems

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

# A database number of its own, flushed before and after the test.
REDIS_URL = os.environ.get("FLOWSITE_ACCEPTANCE_REDIS_URL", "redis://127.0.0.1:6379/13")


@pytest.fixture
def redis_url() -> Iterator[str]:
    """The Redis database for the test, emptied before and after.

    Unreachable Redis skips the test, except under CI (``CI`` set), where it fails:
    a CI run must not pass without having tried the Redis broker.
    """
    try:
        import redis

        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
        client.ping()
    except Exception as exc:
        message = f"Redis is not reachable at {REDIS_URL}: {exc!r}"
        if os.environ.get("CI"):
            pytest.fail(f"{message} (CI is set, so the Redis broker test must run)")
        pytest.skip(f"{message}; set FLOWSITE_ACCEPTANCE_REDIS_URL or start Redis")
    client.flushdb()
    try:
        yield REDIS_URL
    finally:
        client.flushdb()
        client.close()


def test_runs_complete_end_to_end_through_the_redis_broker(redis_url, stack):
    """``redis_url`` comes first so that Redis is flushed only after the processes stop."""
    env = {"FLOWSITE_REDIS_URL": redis_url}
    stack.qcluster(workers=2, env=env)
    stack.sweeper(env=env)
    run_ids = stack.start_runs("acceptance_mixed", [{"pause": [0.0, 0.05]}] * 5, env=env)

    runs = stack.wait_finished(run_ids, timeout=120)

    assert {run.status for run in runs.values()} == {"completed"}
    assert completion_problems(run_ids) == []
    assert idempotency_problems(run_ids) == []
    assert stack.monitor.problems == []
    assert not OrmQ.objects.exists()  # nothing went through the database queue
    assert QueueTask.objects.filter(func="workflows.tasks.run_step", success=True).exists()
