"""The request bodies the API offers, in its schema and in docs/api.md, run as offered
against the demo project's workflows (``flowsite.demo.flows``)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.api.schema_doc import api_schema, operation_at, operations, request_errors
from workflows.api import examples
from workflows.definitions import registry
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

API_DOCS = Path(__file__).resolve().parents[2] / "docs" / "api.md"
SITE = "https://flowsite.example"
DEMO_WORKFLOWS = ("order_fulfilment", "warehouse_dispatch", "flaky_import")


def documented_posts() -> list[tuple[str, Any]]:
    """(path, body) of every ``curl -X POST`` in docs/api.md, its JSON body parsed."""
    text = API_DOCS.read_text().replace("\\\n", " ")
    found = []
    for line in text.splitlines():
        if not line.lstrip().startswith("curl -X POST"):
            continue
        words = shlex.split(line)
        url = next(word for word in words if word.startswith(SITE))
        body = json.loads(words[words.index("-d") + 1]) if "-d" in words else {}
        found.append((url.removeprefix(SITE).split("?")[0], body))
    return found


@pytest.fixture
def admin() -> APIClient:
    user = User.objects.create_superuser("demo-admin", password="pw")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def test_every_body_in_the_docs_fits_its_operation():
    schema = api_schema()
    posts = documented_posts()
    assert len(posts) >= 15
    for path, body in posts:
        assert not request_errors(schema, operation_at(schema, "post", path), body), path


def test_every_example_in_the_schema_fits_its_operation():
    schema = api_schema()
    checked = 0
    for _method, path, operation in operations(schema):
        content = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
        for example in content.get("examples", {}).values():
            assert not request_errors(schema, operation, example["value"]), path
            checked += 1
    assert checked >= 10


def test_the_runs_the_docs_start_are_started(admin):
    starts = [body for path, body in documented_posts() if path == "/api/runs/"]
    assert starts
    for body in starts:
        response = admin.post("/api/runs/", body, format="json")
        assert response.status_code == 201, response.content


def test_the_schema_examples_run_against_the_demo_workflows(admin):
    order = admin.post("/api/runs/", examples.START_ORDER, format="json")
    dispatch = admin.post("/api/runs/", examples.START_DISPATCH, format="json")
    assert (order.status_code, dispatch.status_code) == (201, 201), dispatch.content
    run_pending()

    gate = next(
        step
        for step in admin.get(f"/api/runs/{dispatch.json()['id']}/").json()["steps"]
        if step["kind"] == "gate"
    )
    approved = admin.post(f"/api/gates/{gate['id']}/approve/", examples.APPROVE, format="json")
    assert approved.status_code == 200, approved.content

    run = f"/api/runs/{order.json()['id']}"
    for verb, body in (
        ("pause", examples.REASON),
        ("priority", examples.PRIORITY),
        ("cancel", examples.CANCEL),
        ("rerun", examples.RERUN),
    ):
        response = admin.post(f"{run}/{verb}/", body, format="json")
        assert response.status_code == 200, (verb, response.content)


def test_the_docs_name_workflows_steps_and_options_the_demo_has():
    demo = [registry.latest(name).snapshot() for name in DEMO_WORKFLOWS]
    steps = {step["name"] for workflow in demo for step in workflow["steps"]}
    options = {
        option["value"]
        for workflow in demo
        for step in workflow["steps"]
        for option in step.get("options", [])
    }
    for path, body in documented_posts():
        named = body.get("workflow") or body.get("filter", {}).get("workflow")
        assert named is None or named in DEMO_WORKFLOWS, (path, named)
        assert body.get("from_step", "create_invoice") in steps, path
        assert set(body.get("selections", [])) <= options, path
