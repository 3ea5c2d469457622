"""Every operation of the API, as its URL resolver lists them (a new one is covered
without touching this file), meets hostile input: cursors the server did not issue,
more query parameters than Django reads, bad ``page_size`` values, ids in spellings the
API never hands out, NUL bytes and lone surrogates in paths, queries and JSON bodies,
wrong content types and 10 MB bodies.

No answer is a 5xx. Every error is in the envelope with a status the schema documents
for the operation, and each input that must be refused is a 4xx. A harmless input may
succeed (a cursor sent to a list that is not paginated is ignored).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.urls import URLPattern
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

import workflows
from tests.api.sample import Gated, Sample
from workflows.api.urls import urlpatterns

pytestmark = pytest.mark.django_db


# Path segments, percent-encoded as a client sends them, that are not the id ``value``
# although int() or UUID() would read some of them as it.
def non_canonical(value: str) -> list[str]:
    spellings = [f"%2B{value}", f"%20{value}%20", f"{value}%00", "%00", "%ED%A0%80"]
    if value.isdigit():
        full_width = "".join(chr(0xFF10 + int(digit)) for digit in value)
        spellings += [quote(full_width), f"0_{value}"]
    elif value.count("-") == 4:  # a run's UUID
        spellings += [f"%7B{value}%7D", value.replace("-", ""), f"urn:uuid:{value}"]
    return spellings


HOSTILE_TEXT = ["\x00", "a\x00b", "\ud800", "\udfff tail"]
HOSTILE_QUERIES = [
    "cursor=cD1hYmM%3D",  # base64 of p=abc
    "cursor=%00",
    "page_size=abc",
    "page_size=-1",
    "page_size=100000",
    "status=%00",
    "workflow=%ED%A0%80",
    "after_seq=99999999999999999999",
    "after_seq=abc",
    "after_seq=-1",
    "after=99999999999999999999",
    "after=-1",
    "limit=0",
    "stream=%00",
    "stream=bogus",
    "limit=abc",
    "consumer=%00",
    "wait=-1",
    "wait=61",
    "wait=nan",
    "wait=%00",
    "%00=%00",
    "&".join(f"p{index}=1" for index in range(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1)),
]
TEN_MB = b"x" * (10 * 1024 * 1024)
SCHEDULE_KEY = "api-sample-hourly"


def operations() -> Iterator[tuple[str, str]]:
    """(method, route template) of every operation, ``{name}`` for each URL parameter."""
    for pattern in urlpatterns:
        assert isinstance(pattern, URLPattern)
        callback: Any = pattern.callback
        route = re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", str(pattern.pattern)).strip("^$")
        actions = getattr(callback, "actions", None)
        # A plain view (waits, events, the schema and docs) answers the methods it defines.
        view = getattr(callback, "view_class", None)
        methods = list(actions) if actions else [m for m in ("get", "post") if hasattr(view, m)]
        for method in methods:
            yield method, "/api/" + route


def real_values(sample: Sample, route: str) -> dict[str, str]:
    """A real object for each URL parameter, so that hostile input reaches the view."""
    resource = route.split("/")[2]
    pk = {
        "runs": str(sample.run.pk),
        "steps": str(sample.gate.pk),
        "gates": str(sample.gate.pk),
        "budgets": str(sample.budget.pk),
        "flows": str(sample.flow.pk),
    }.get(resource, "")
    return {
        "pk": pk,
        "name": "api_sample_gated",
        "verb": "cancel",
        "step": "approve",
        "key": SCHEDULE_KEY,
    }


@pytest.fixture
def client(sample: Sample) -> APIClient:
    # A schedule for the schedule routes' hostile input to reach.
    workflows.create_schedule(Gated, key=SCHEDULE_KEY, every=timedelta(hours=1))
    user = User.objects.create_superuser("hostile", password="pw")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.fixture(scope="module")
def schema(django_db_blocker: Any) -> dict[str, Any]:
    with django_db_blocker.unblock():
        return APIClient().get("/api/schema/", {"format": "json"}).json()


def documented(schema: dict[str, Any], method: str, route: str) -> dict[str, Any] | None:
    """The schema's operation for a route of the resolver (``{pk}`` is its ``{id}``)."""
    return schema["paths"].get(route.replace("{pk}", "{id}"), {}).get(method)


def hostile_body(schema: dict[str, Any], operation: dict[str, Any] | None, text: str) -> Any:
    """The operation's request body with ``text`` in each field that takes text."""
    content = (operation or {}).get("requestBody", {}).get("content", {})
    ref = content.get("application/json", {}).get("schema", {}).get("$ref")
    properties = {}
    if ref is not None:
        properties = schema["components"]["schemas"][ref.rsplit("/", 1)[1]].get("properties", {})
    if not properties:
        return {"field": text}  # a field no body takes
    body: dict[str, Any] = {}
    for name, prop in properties.items():
        kind = prop.get("type")
        if kind == "string":
            body[name] = text
        elif kind == "array":
            body[name] = [text]
        elif kind in (None, "object"):
            body[name] = {text: text}
    return body


class Checker:
    """Sends requests for one operation and checks each answer."""

    def __init__(self, client: APIClient, method: str, operation: dict[str, Any] | None):
        self.client = client
        self.method = method
        self.documented = set(operation["responses"]) if operation else None

    def send(self, path: str, *, refused: bool, **kwargs: Any) -> int:
        response = self.client.generic(self.method.upper(), path, **kwargs)
        where = f"{self.method.upper()} {path[:120]} {kwargs.get('content_type', '')}"
        assert response.status_code < 500, (where, response.content[:300])
        if refused:
            assert 400 <= response.status_code < 500, (where, response.status_code)
        if response.status_code >= 400 and response["Content-Type"] == "application/json":
            body = response.json()
            assert set(body) == {"error"}, (where, body)
            assert set(body["error"]) == {"code", "message", "details", "retryable"}, where
        elif response.status_code >= 400:
            raise AssertionError((where, response.status_code, response["Content-Type"]))
        if self.documented is not None and response.status_code != 405:
            assert str(response.status_code) in self.documented, (where, response.status_code)
        return response.status_code


@pytest.mark.parametrize(("method", "route"), sorted(set(operations())))
def test_no_hostile_input_makes_an_operation_answer_5xx(client, sample, schema, method, route):
    operation = documented(schema, method, route)
    check = Checker(client, method, operation)
    path = route.format(**real_values(sample, route))
    parameters = (operation or {}).get("parameters", [])
    paginated = any(parameter["name"] == "cursor" for parameter in parameters)
    posts = method == "post"

    for query in HOSTILE_QUERIES:
        must_refuse = query.startswith(("cursor", "page_size")) and paginated
        must_refuse |= query.count("&") >= settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
        check.send(f"{path}?{query}", refused=must_refuse, content_type="application/json")

    real = real_values(sample, route)
    for name in re.findall(r"{(\w+)}", route):
        for text in non_canonical(real[name]):
            check.send(
                route.format(**{**real, name: text}), refused=True, content_type="application/json"
            )

    for text in HOSTILE_TEXT:
        body = json.dumps(hostile_body(schema, operation, text))
        check.send(path, refused=posts, data=body, content_type="application/json")
    invalid_utf8 = b'{"token": "\xed\xa0\x80"}'
    check.send(path, refused=posts, data=invalid_utf8, content_type="application/json")
    for content_type, data in (("text/plain", "{}"), ("application/x-www-form-urlencoded", "a=1")):
        check.send(path, refused=posts, data=data, content_type=content_type)
    check.send(path, refused=posts, data=TEN_MB, content_type="application/json")
    check.send(path, refused=False, HTTP_ACCEPT="application/xml")
