"""Run in the fresh project by its venv's python: start a run, finish it in-process with
``run_pending``, then open the admin and the API with Django's test client.

Prints one JSON object of what it saw; the test asserts on it.
"""

from __future__ import annotations

import json

import django

django.setup()

from django.contrib.auth.models import Permission, User  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402
from rest_framework.authtoken.models import Token  # noqa: E402

import workflows  # noqa: E402
from workflows.testing import run_pending  # noqa: E402

setup_test_environment()  # lets the test client's host, "testserver", through

run = workflows.start_run("checkout", {"order_id": "A-1"}, idempotency_key="order-A-1")
pending = run_pending()
run.refresh_from_db()

operator = User.objects.create_user("operator")
operator.user_permissions.add(Permission.objects.get(codename="view_run"))
token = Token.objects.create(user=operator)
client = Client()
api = Client(headers={"Authorization": f"Token {token.key}"})
definitions = api.get("/api/workflows/")

print(
    json.dumps(
        {
            "run_status": run.status,
            "steps_run": pending.steps,
            "outputs": {step.name: step.output for step in run.steps.order_by("id")},
            "admin_login": client.get("/admin/login/").status_code,
            "schema": client.get("/api/schema/").status_code,
            "docs": client.get("/api/docs/").status_code,
            "workflows": definitions.status_code,
            "workflows_body": definitions.json() if definitions.status_code == 200 else None,
        }
    )
)
