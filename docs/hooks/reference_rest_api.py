"""The reference of the REST API, as Markdown, from the OpenAPI document the app serves.

The document is generated in-process, as ``manage.py spectacular`` and the app's
``schema/`` view do, for the API mounted at ``api/`` (what docs/api.md tells a project
to write). Operations are grouped by their tag, in path order; each names its
parameters, its request body and its responses, and a schema is linked to its own
section below, which lists its fields.
"""

from __future__ import annotations

from typing import Any

from django.urls import include, path
from drf_spectacular.generators import SchemaGenerator
from reference_markdown import anchor, cell, prose, table

METHODS = ("get", "post", "put", "patch", "delete")
MOUNTED_AT = "api/"


def openapi_document() -> dict[str, Any]:
    """The API's OpenAPI document, as ``GET /api/schema/`` serves it."""
    from workflows.api.urls import app_name, resources

    patterns = [path(MOUNTED_AT, include((resources, app_name)))]
    document: dict[str, Any] = SchemaGenerator(patterns=patterns, api_version="1").get_schema(
        request=None, public=True
    )
    return document


def schema_anchor(name: str) -> str:
    return anchor("schema", name)


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def type_of(schema: dict[str, Any]) -> str:
    """A schema's type in a few words, a named schema linked to its section."""
    if "$ref" in schema:
        name = _ref_name(schema["$ref"])
        return f"[`{name}`](#{schema_anchor(name)})"
    for combined in ("oneOf", "anyOf", "allOf"):
        if combined in schema:
            return " or ".join(type_of(option) for option in schema[combined])
    kind = schema.get("type", "any")
    if kind == "array":
        kind = f"array of {type_of(schema.get('items', {}))}"
    elif "format" in schema:
        kind = f"{kind} ({schema['format']})"
    if "enum" in schema:
        kind += ": " + ", ".join(f"`{value}`" for value in schema["enum"] if value is not None)
    return kind + (", nullable" if schema.get("nullable") else "")


def _body_schema(content: dict[str, Any]) -> dict[str, Any] | None:
    media = content.get("application/json") or next(iter(content.values()), None)
    return media.get("schema") if media else None


def _parameters(operation: dict[str, Any]) -> list[str]:
    rows = [
        [
            f"`{cell(parameter['name'])}`",
            parameter["in"],
            cell(type_of(parameter.get("schema", {}))),
            "yes" if parameter.get("required") else "no",
            cell(prose(parameter.get("description", ""))),
        ]
        for parameter in operation.get("parameters", [])
    ]
    if not rows:
        return []
    return ["**Parameters**", "", *table(["Name", "In", "Type", "Required", "Description"], rows)]


def _request_body(operation: dict[str, Any]) -> list[str]:
    body = operation.get("requestBody")
    schema = _body_schema(body.get("content", {})) if body else None
    if schema is None:
        return []
    required = " (required)" if body and body.get("required") else ""
    return [f"**Request body**{required}: {type_of(schema)}"]


def _responses(operation: dict[str, Any]) -> list[str]:
    """A row per status; the errors whose schema says no more than their status share one
    row, so the statuses that say something stand out."""
    rows, bare_errors = [], []
    for status, response in sorted(operation.get("responses", {}).items()):
        schema = _body_schema(response.get("content", {}))
        body = type_of(schema) if schema else "no body"
        if status >= "400" and not response.get("description"):
            bare_errors.append((f"`{status}`", body))
            continue
        rows.append([f"`{status}`", cell(body), cell(prose(response.get("description", "")))])
    if bare_errors:
        statuses = ", ".join(status for status, _ in bare_errors)
        bodies = sorted({body for _, body in bare_errors})
        rows.append([statuses, cell(" or ".join(bodies)), "see the error's `code`"])
    return ["**Responses**", "", *table(["Status", "Body", "When"], rows)]


def operation_markdown(route: str, method: str, operation: dict[str, Any]) -> list[str]:
    """One operation: method and path, what it does, parameters, body, responses."""
    lines = [f"### `{method.upper()} {route}`", ""]
    for key in ("summary", "description"):
        if operation.get(key):
            lines += [prose(operation[key]), ""]
    if operation.get("deprecated"):
        lines += ["*Deprecated.*", ""]
    for part in (_parameters(operation), _request_body(operation), _responses(operation)):
        if part:
            lines += [*part, ""]
    return lines


def schema_markdown(name: str, schema: dict[str, Any]) -> list[str]:
    """One named schema: an anchor, its description, its fields (or its values)."""
    lines = [f'<a id="{schema_anchor(name)}"></a>', "", f"### `{name}`", ""]
    if schema.get("description"):
        lines += [prose(schema["description"]), ""]
    properties = schema.get("properties", {})
    if properties:
        required = set(schema.get("required", []))
        rows = [
            [
                f"`{field}`",
                cell(type_of(spec)),
                "yes" if field in required else "no",
                cell(spec.get("description", ""))
                + (" (read-only)" if spec.get("readOnly") else ""),
            ]
            for field, spec in properties.items()
        ]
        lines += table(["Field", "Type", "Required", "Description"], rows)
        if schema.get("additionalProperties") is False:
            lines += ["", "No other field is accepted."]
    else:
        lines.append(f"Type: {type_of(schema)}")
    return [*lines, ""]


def rest_api_markdown() -> str:
    """Every operation of the API by tag, then every schema they name."""
    document = openapi_document()
    by_tag: dict[str, list[str]] = {}
    for route, item in document["paths"].items():
        for method in METHODS:
            if method in item:
                operation = item[method]
                tag = (operation.get("tags") or ["other"])[0]
                by_tag.setdefault(tag, []).extend(operation_markdown(route, method, operation))
    lines = [f"The API as `GET /{MOUNTED_AT}schema/` describes it (OpenAPI 3).", ""]
    for tag in sorted(by_tag):
        lines += [f"## {tag}", "", *by_tag[tag]]
    lines += ["## Schemas", ""]
    for name, schema in sorted(document["components"].get("schemas", {}).items()):
        lines += schema_markdown(name, schema)
    return "\n".join(lines)
