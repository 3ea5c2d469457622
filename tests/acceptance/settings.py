"""Settings of the processes acceptance tests start: qcluster, sweeper and helpers.

The demo project's settings (so workers run as deployed: django-q2 executor, ORM broker
on the workflows database or Redis with ``FLOWSITE_REDIS_URL``), plus the acceptance test
app, with timers, recovery and redispatch fast enough to happen within a test. The
tests point ``DATABASE_URL`` at pytest's test database.
"""

from __future__ import annotations

import os
from datetime import timedelta

from flowsite.settings import *  # noqa: F403

# The demo app's tasks keep the default 5-minute lease, which the system checks would
# match with a 5-minute queue timeout; these workers only need the acceptance workflows.
INSTALLED_APPS = [
    *(app for app in INSTALLED_APPS if app != "flowsite.demo"),  # noqa: F405
    "tests.acceptance.flowapp",
]

# REDISPATCH_AFTER keeps its 30 s default: the chaos test's queue backlog outlasts a
# shorter one, and re-sending every waiting step doubles the queue it is waiting in.
WORKFLOWS = {
    **WORKFLOWS,  # noqa: F405
    "CHAIN_BUDGET": timedelta(seconds=1),
    "TIMER_POLL_INTERVAL": timedelta(milliseconds=100),
    "RECOVERY_INTERVAL": timedelta(milliseconds=500),
    # A webhook sender task must also fit in the queue's timeout (workflows.W007).
    "WEBHOOK_TIMEOUT": timedelta(seconds=5),
}

# The system checks (workflows.E005/E006) require timeout >= CHAIN_BUDGET + the longest
# step timeout (2 s here) and retry > timeout. The timeout also bounds how long a test
# may keep a worker stopped: django-q2's alarm fires in real time, even while stopped.
Q_CLUSTER = {
    **Q_CLUSTER,  # noqa: F405
    # Queue names per test, so suites on other databases or Redis never share a queue.
    "name": os.environ.get("FLOWSITE_Q_NAME", "acceptance"),
    "timeout": 10,
    "retry": 12,
    # Keep every result without pruning. django-q2 1.11 prunes by reading up to
    # save_limit rows FOR UPDATE per result; with the demo's 1000 its monitor falls
    # behind, acknowledgements lag past `retry` (redelivering every task again and
    # again) and the result pipe fills. A worker SIGKILLed while its result thread
    # blocks on that full pipe dies holding the result queue's lock, and the whole
    # cluster stops. Each test's database is emptied afterwards anyway.
    "save_limit": 0,
    "log_level": "INFO",
}

LOGGING = {
    **LOGGING,  # noqa: F405
    "formatters": {"pid": {"format": "%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "pid"}},
}
