"""The API's OpenAPI document as the tests read it, and request bodies checked against it."""

from __future__ import annotations

import re
from typing import Any

import jsonschema
from rest_framework.test import APIClient


def api_schema() -> dict[str, Any]:
    response = APIClient().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200, response.content
    return response.json()


def operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method, path, operation)
        for path, item in schema["paths"].items()
        for method, operation in item.items()
    ]


def operation_at(schema: dict[str, Any], method: str, url_path: str) -> dict[str, Any]:
    """The operation a concrete path (``/api/runs/0b9c…/cancel/``) calls; literal
    segments before parameters, as the URL resolver orders ``bulk`` before ``{id}``."""
    for path, item in sorted(schema["paths"].items(), key=lambda entry: _literal_first(entry[0])):
        if re.fullmatch(re.sub(r"\{\w+\}", "[^/]+", path), url_path) and method in item:
            return item[method]
    raise AssertionError(f"no operation {method.upper()} {url_path} in the schema")


def _literal_first(path: str) -> tuple[int, int]:
    return path.count("{"), -path.find("{")


def request_errors(schema: dict[str, Any], operation: dict[str, Any], body: Any) -> list[str]:
    """Why ``body`` does not fit the operation's request schema (none: it fits)."""
    ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    document = {"$ref": ref, "components": schema["components"]}
    validator = jsonschema.Draft7Validator(document)
    return [error.message for error in validator.iter_errors(body)]
