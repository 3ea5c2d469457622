"""Settings for ``bench/workers.py``: the demo project's, plus the benchmark workflows.

Steps run in django-q2 workers (``EXECUTOR = "django_q"``) with the demo project's
``Q_CLUSTER``, which satisfies the system checks ``workflows.E004``-``E008`` and
``W004``; only the number of workers is set here (``BENCH_WORKERS``, default 2) and
the cluster is given its own name. The database comes from ``DATABASE_URL`` as in the
demo project.
"""

from __future__ import annotations

import os

from flowsite.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "bench.benchapp"]  # noqa: F405

WORKFLOWS = {**WORKFLOWS, "EXECUTOR": "django_q"}  # noqa: F405

Q_CLUSTER = {
    **Q_CLUSTER,  # noqa: F405
    "name": "flowsite_bench",
    "workers": int(os.environ.get("BENCH_WORKERS", "2")),
}

# Experiments only (``bench/workers.py --conn-max-age``): how long processes keep a
# database connection, instead of the demo project's value (0 = a new one every time).
if os.environ.get("BENCH_CONN_MAX_AGE"):
    DATABASES["default"]["CONN_MAX_AGE"] = int(os.environ["BENCH_CONN_MAX_AGE"])  # noqa: F405
