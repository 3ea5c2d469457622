"""Property-based fuzzing of the whole API from its own OpenAPI document (schemathesis).

Every operation of the schema is called in-process, through Django's WSGI application,
with generated paths, queries and bodies, by a user holding every permission of the
API, over a database holding a run of each kind (:mod:`tests.api.sample`, so that small
generated ids name real steps, gates and budgets): no response may be a 5xx, and every
response must match what the schema says of it, its status, content type and body.
Bounded in examples per operation, so the suite stays fast and deterministic.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import schemathesis
from django.contrib.auth.models import Permission, User
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from django.test import Client
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

import workflows
from tests.api.sample import populate
from tests.api.test_api_basics import Described

EXAMPLES_PER_OPERATION = 15
# How each operation is fuzzed: a fixed number of examples, no deadline (a request's time
# varies), no example database, and no health check (the strategies are the schema's).
FUZZING = settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
# The fuzzing user's credential, set by the fixture each test (cases carry no fixtures).
_CREDENTIAL: dict[str, str] = {}


@pytest.fixture
def api_schema(db: Any) -> Iterator[Any]:
    """The API's own OpenAPI document, as served under ``/api/``, bound to the WSGI app.

    Django's WSGI handler closes the database connection after each request, which
    would end the test's transaction; that is switched off (after the schema request,
    since Django's test client switches it back on) as the test client does it.
    """
    populate()
    # Keyed as a generated path often is, so the schedule verbs meet a schedule too.
    for key in ("0", "a"):
        workflows.create_schedule(Described, key=key, every=timedelta(minutes=5))
    user = User.objects.create_user("fuzzer")
    user.user_permissions.add(
        *Permission.objects.filter(
            codename__in=[
                "view_run",
                "start_run",
                "operate_run",
                "manage_consumers",
                "add_schedule",
                "change_schedule",
                "delete_schedule",
                "do_external_work",
            ]
        )
    )
    token = Token.objects.create(user=user)
    response = Client().get("/api/schema/", HTTP_AUTHORIZATION=f"Token {token.key}")
    assert response.status_code == 200, response.content
    raw = response.json() if response["Content-Type"].endswith("json") else None
    if raw is None:
        import yaml  # drf-spectacular's default rendering; PyYAML comes with it

        raw = yaml.safe_load(response.content)
    schema = schemathesis.openapi.from_dict(raw)
    schema.app = get_wsgi_application()
    _CREDENTIAL["Authorization"] = f"Token {token.key}"
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield schema
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


pytestmark = pytest.mark.slow

schema = schemathesis.pytest.from_fixture("api_schema")


def call_checked(case: Any) -> Any:
    """Send the fuzzed request as the fuzzing user; fail on a 5xx or an answer off the
    schema (its status, content type or body)."""
    return case.call_and_validate(
        headers=dict(_CREDENTIAL),
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
    )


@schema.parametrize()
@FUZZING
def test_no_operation_answers_5xx_or_off_its_schema(case: Any) -> None:
    response = call_checked(case)
    # Those take no credentials: a signed token in the body is theirs.
    if not case.path.startswith(("/api/callbacks/", "/api/signals/by-token/")):
        assert response.status_code != 401, "the fuzzing user's token was not used"
