"""The OpenAPI document says what the API enforces: request bodies are closed, and each
operation lists the errors it can answer (the envelope for each)."""

from __future__ import annotations

import pytest

from tests.api.schema_doc import api_schema, operations, request_errors

pytestmark = pytest.mark.django_db

# The operations authorised by a signed token in the body alone: no 401, throttled.
TOKEN_AUTHORISED = ("/api/callbacks/", "/api/signals/by-token/")


def test_every_request_body_refuses_what_it_does_not_declare():
    schema = api_schema()
    requests = {
        name: component
        for name, component in schema["components"]["schemas"].items()
        if name.endswith("Request")
    }
    assert "EmptyRequest" in requests and "StartRunRequest" in requests
    for name, component in requests.items():
        assert component.get("additionalProperties") is False, name


def test_constraints_the_api_enforces_are_in_the_schema():
    schema = api_schema()
    components = schema["components"]["schemas"]
    assert components["StartRunRequest"]["properties"]["input"]["type"] == "object"
    assert components["BulkRequest"]["properties"]["ids"]["minItems"] == 1
    run_verb = next(op for method, path, op in operations(schema) if path.endswith("/pause/"))
    assert request_errors(schema, run_verb, {"reason": "x", "force": True})
    assert not request_errors(schema, run_verb, {"reason": "x"})
    raise_limit = next(op for _, path, op in operations(schema) if path.endswith("/raise/"))
    for limit in ("80000", "0.5", 12, 0):
        assert not request_errors(schema, raise_limit, {"limit": limit}), limit
    for limit in ("-1", "", "1e3", -5, "1.1234567"):
        assert request_errors(schema, raise_limit, {"limit": limit}), limit


def test_every_operation_documents_the_errors_it_can_answer():
    schema = api_schema()
    envelope = "#/components/schemas/Error"
    for method, path, operation in operations(schema):
        statuses = set(operation["responses"])
        expected = {"400", "405", "406", "503"}
        if method == "post":
            expected |= {"413", "415"}
        if any(parameter["name"] == "cursor" for parameter in operation.get("parameters", [])):
            expected |= {"404"}
        if path.startswith(TOKEN_AUTHORISED):
            expected |= {"429"}
        else:
            expected |= {"401"}
        assert expected <= statuses, (method, path, expected - statuses)
        for status in statuses - {"200", "201"}:
            content = operation["responses"][status]["content"]["application/json"]
            assert content["schema"]["$ref"] == envelope, (method, path, status)
