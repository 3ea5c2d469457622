"""Races over HTTP against a real server process: one decision wins, one run starts.

The server is ``manage.py runserver`` (threaded: one thread per request, each with its
own database connection) on pytest's test database, with the test settings: the demo
project's, which install ``rest_framework.authtoken``, with steps left for
``run_pending`` so that the only writers are the requests under test. The clients are
``urllib`` in threads released together by a barrier.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from rest_framework.authtoken.models import Token

import workflows
from workflows.models import Event, Run, Step
from workflows.testing import run_pending

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

REQUEST_TIMEOUT_SECONDS = 60.0
ROUNDS = 5
STARTERS = 8


def token_for(username: str, *codenames: str) -> str:
    user = User.objects.create_user(username)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return Token.objects.create(user=user).key


def post(url: str, body: dict[str, Any], token: str, **headers: str) -> tuple[int, Any]:
    """POST JSON; the status and the decoded body, for errors too."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Token {token}", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_SECONDS) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def at_once(calls: list[Callable[[], tuple[int, Any]]]) -> list[tuple[int, Any]]:
    """Send every request at the same moment; a hung request fails instead of hanging."""
    barrier = threading.Barrier(len(calls), timeout=REQUEST_TIMEOUT_SECONDS)

    def released(call: Callable[[], tuple[int, Any]]) -> tuple[int, Any]:
        barrier.wait()
        return call()

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = [pool.submit(released, call) for call in calls]
        return [future.result(timeout=2 * REQUEST_TIMEOUT_SECONDS) for future in futures]


def waiting_dispatch(order: str) -> Step:
    """A ``warehouse_dispatch`` run of the demo whose approval gate waits."""
    run = workflows.start_run(
        "warehouse_dispatch",
        {"order_id": order, "parcels": [{"id": "p1", "weight_kg": 1}]},
        business_key=order,
    )
    run_pending()
    gate = run.steps.get(name="approval")
    assert gate.status == "waiting"
    return gate


def test_two_clients_approving_one_gate_at_once_one_wins(server: str):
    tokens = [token_for(name, "approve_dispatch") for name in ("ann", "colleague")]
    outcomes: Counter[tuple[int, ...]] = Counter()
    losers: Counter[str] = Counter()
    for round_number in range(ROUNDS):
        gate = waiting_dispatch(f"D-{round_number}")
        url = f"{server}/api/gates/{gate.pk}/approve/"
        # Every other round without expected_version: the engine's compare-and-set alone
        # must then turn the loser away.
        checked = round_number % 2 == 0
        body = {
            "selections": ["express"],
            **({"expected_version": gate.version} if checked else {}),
        }
        results = at_once([partial(post, url, body, token) for token in tokens])
        statuses = sorted(status for status, _ in results)
        outcomes[tuple(statuses)] += 1
        assert statuses == [200, 409], results
        (winner,) = [reply for status, reply in results if status == 200]
        (loser,) = [reply for status, reply in results if status == 409]
        losers[loser["error"]["code"]] += 1
        allowed = (
            ("gate_already_decided", "stale_version") if checked else ("gate_already_decided",)
        )
        assert loser["error"]["code"] in allowed, loser
        decided = Step.objects.get(pk=gate.pk)
        assert (decided.status, decided.decision) == ("completed", "approved")
        assert decided.decided_by.username == winner["decision"]["by"]
        assert decided.decided_from == "127.0.0.1"
        events = Counter(
            Event.objects.filter(run_id=gate.run_id, step_id=gate.pk).values_list("type", flat=True)
        )
        assert (events["gate.decided"], events["step.completed"]) == (1, 1), events
        assert Step.objects.get(run_id=gate.run_id, name="pack").status != "pending"
    print(f"\napprovals race over {ROUNDS} rounds: {dict(outcomes)}, losers got {dict(losers)}")


def test_eight_clients_starting_with_one_idempotency_key_start_one_run(server: str):
    token = token_for("starter", "view_run", "start_run")
    body = {"workflow": "flaky_import", "input": {"batch": "B-1"}}
    start = partial(post, f"{server}/api/runs/", body, token, **{"Idempotency-Key": "import-B-1"})
    results = at_once([start] * STARTERS)
    statuses = Counter(status for status, _ in results)
    assert set(statuses) <= {200, 201} and statuses[201] >= 1, results
    runs = Run.objects.filter(workflow_name="flaky_import", idempotency_key="import-B-1")
    assert runs.count() == 1
    assert {reply["id"] for _, reply in results} == {str(runs.get().pk)}
    print(f"\n{STARTERS} starts with one key: statuses {dict(statuses)}, one run")
