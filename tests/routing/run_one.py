"""Migrate both databases, run one workflow to its end, print where the rows went (JSON)."""

from __future__ import annotations

import json
from datetime import timedelta

import django
from django.core.management import call_command

django.setup()

from django.db import connections  # noqa: E402
from django.utils import timezone  # noqa: E402

import workflows  # noqa: E402
from tests.routing.routed import Routed  # noqa: E402
from workflows.testing import run_pending  # noqa: E402

for alias in ("default", "primary"):
    call_command("migrate", database=alias, verbosity=0)
run = workflows.start_run(Routed, {})
run_pending(until=timezone.now() + timedelta(hours=1))
run.refresh_from_db()
tables = {alias: connections[alias].introspection.table_names() for alias in connections}
print(
    json.dumps(
        {
            "status": run.status,
            "default_has_workflows_tables": "workflows_run" in tables["default"],
            "primary_has_workflows_tables": "workflows_run" in tables["primary"],
            "runs_in_primary": connections["primary"]
            .cursor()
            .execute("SELECT COUNT(*) FROM workflows_run")
            .fetchone()[0],
        }
    )
)
