"""The API's frame: authentication, the error envelope, definitions, the schema and docs."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from tests.support.handlers import NOOP
from workflows import Task, Workflow

pytestmark = pytest.mark.django_db


class Described(Workflow):
    name = "api_described"
    only = Task(NOOP)


def assert_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details", "retryable"}
    assert body["error"]["code"] == code, body
    return body["error"]


def test_anonymous_callers_are_asked_to_authenticate(api):
    response = api("anonymous").get("/api/workflows/")
    assert_error(response, 401, "not_authenticated")
    assert response["WWW-Authenticate"] == "Token"


def test_a_user_without_the_view_permission_is_refused(api):
    error = assert_error(api("nobody").get("/api/workflows/"), 403, "permission_denied")
    assert "workflows.view_run" in error["message"]


def test_definitions_are_listed_with_their_versions_and_graph(api):
    response = api("viewer").get("/api/workflows/")
    assert response.status_code == 200
    described = next(item for item in response.json() if item["name"] == "api_described")
    assert described["version"] == 1 and described["versions"] == [1]
    assert "only" in str(described["graph"])
    assert described["input_example"] is None
    one = api("viewer").get("/api/workflows/api_described/")
    assert one.status_code == 200 and one.json()["name"] == "api_described"


def test_a_definition_offers_its_input_example_which_starts_a_run(api):
    """The demo's examples are real inputs: what the listing offers, a start accepts."""
    example = api("viewer").get("/api/workflows/order_fulfilment/").json()["input_example"]
    assert example["order_id"] == "A-1003"
    started = api("starter").post(
        "/api/runs/", {"workflow": "order_fulfilment", "input": example}, format="json"
    )
    assert started.status_code == 201, started.content


def test_an_unknown_definition_is_a_404_in_the_envelope(api):
    assert_error(api("viewer").get("/api/workflows/nope/"), 404, "workflow_not_found")


def test_the_openapi_schema_and_local_docs_are_served(api):
    schema = api("viewer").get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    assert schema.json()["openapi"].startswith("3.")
    assert "/api/workflows/" in schema.json()["paths"]
    docs = api("viewer").get("/api/docs/")
    assert docs.status_code == 200
    page = docs.content.decode()
    assert "swagger-ui" in page
    assert not any(cdn in page for cdn in ("cdn.jsdelivr", "unpkg.com", "cdnjs"))


def test_the_schema_validates_without_warnings(tmp_path):
    """Every view typed and every choice set named once: drf-spectacular has nothing to
    say (a warning would mean an operation documented wrongly or not at all)."""
    call_command(
        "spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml")
    )
    assert (tmp_path / "schema.yaml").read_text().startswith("openapi: 3")
