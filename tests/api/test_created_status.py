"""Issue #35, point 8: status codes say who created. Of racing identical creates exactly
one request gets ``201``; the others ``200`` with the same body. Real concurrent
requests, each thread on its own database connection.

Done for runs started by idempotency key (``start_run_once``) and signals sent with one
(``send_signal_once``), flows created by key (``create_flow_once``); flow members and
edges are not yet."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

import workflows
from tests.handlers import WORK
from workflows import Task, WaitForSignal, Workflow
from workflows.models import Flow, Run, Signal

RACERS = 8


class Keyed(Workflow):
    name = "created_status_keyed"
    only = Task(WORK)


class Awaiting(Workflow):
    name = "created_status_awaiting"
    approved = WaitForSignal("approved")


def client(token: str) -> APIClient:
    made = APIClient()
    made.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return made


def test_a_repeat_start_by_key_is_200_and_the_first_201(api, db):
    body = {"workflow": Keyed.name, "input": {"n": 1}, "idempotency_key": "order-1"}
    first = api("starter").post("/api/runs/", body, format="json")
    again = api("starter").post("/api/runs/", body, format="json")
    assert (first.status_code, again.status_code) == (201, 200), again.content
    assert first.json()["id"] == again.json()["id"]


def test_start_run_once_says_which_call_created_the_run(db):
    first = workflows.start_run_once(Keyed, {"n": 2}, idempotency_key="order-2")
    again = workflows.start_run_once(Keyed, {"n": 2}, idempotency_key="order-2")
    assert (first.created, again.created) == (True, False)
    assert first.value.pk == again.value.pk
    assert isinstance(first, workflows.Created)
    assert workflows.start_run(Keyed, {"n": 2}, idempotency_key="order-2").pk == first.value.pk


@pytest.mark.django_db(transaction=True)
def test_racing_starts_with_one_key_have_exactly_one_201(api, concurrently):
    api("starter")  # creates the user and its token
    token = Token.objects.get(user__username="starter-user").key
    for round_number in range(3):
        body = {
            "workflow": Keyed.name,
            "input": {"round": round_number},
            "idempotency_key": f"race-{round_number}",
        }

        def start(body=body):
            response = client(token).post("/api/runs/", body, format="json")
            return response.status_code, response.json()

        answers = concurrently(*[start] * RACERS)
        assert not [a for a in answers if isinstance(a, Exception)], answers
        statuses = sorted(status for status, _ in answers)
        assert statuses == [200] * (RACERS - 1) + [201], answers
        ids = {answer["id"] for _, answer in answers}
        assert len(ids) == 1
        assert Run.objects.filter(idempotency_key=f"race-{round_number}").count() == 1
        bodies = [{k: v for k, v in answer.items() if k != "explain"} for _, answer in answers]
        assert all(b["id"] == bodies[0]["id"] and b["input"] == bodies[0]["input"] for b in bodies)


def racing_answers(concurrently, token: str, url: str, body: dict) -> list[tuple[int, dict]]:
    def send():
        response = client(token).post(url, body, format="json")
        return response.status_code, response.json()

    answers = concurrently(*[send] * RACERS)
    assert not [a for a in answers if isinstance(a, Exception)], answers
    return answers


@pytest.mark.django_db(transaction=True)
def test_racing_signals_with_one_key_have_exactly_one_201(api, concurrently):
    api("operator")
    token = Token.objects.get(user__username="operator-user").key
    for round_number in range(3):
        run = workflows.start_run(Awaiting)
        body = {"name": "approved", "payload": {"ok": round_number}, "idempotency_key": "k-1"}
        answers = racing_answers(concurrently, token, f"/api/runs/{run.pk}/signals/", body)
        assert sorted(status for status, _ in answers) == [200] * (RACERS - 1) + [201], answers
        assert all(answer == answers[0][1] for _, answer in answers)  # the same body
        assert Signal.objects.filter(run=run).count() == 1


def test_send_signal_once_says_which_call_created_the_signal(db):
    run = workflows.start_run(Awaiting)
    first = workflows.send_signal_once(run, "approved", {"ok": 1}, idempotency_key="s")
    again = workflows.send_signal_once(run, "approved", {"ok": 1}, idempotency_key="s")
    assert (first.created, again.created) == (True, False)
    assert first.value.pk == again.value.pk


@pytest.mark.django_db(transaction=True)
def test_racing_flow_creations_with_one_key_have_exactly_one_201(api, concurrently):
    api("starter")
    token = Token.objects.get(user__username="starter-user").key
    for round_number in range(3):
        body = {"name": "nightly", "key": f"nightly-{round_number}"}
        answers = racing_answers(concurrently, token, "/api/flows/", body)
        assert sorted(status for status, _ in answers) == [200] * (RACERS - 1) + [201], answers
        assert len({answer["id"] for _, answer in answers}) == 1
        assert Flow.objects.filter(key=f"nightly-{round_number}").count() == 1


def test_create_flow_once_says_which_call_created_the_flow(db):
    first = workflows.create_flow_once("nightly", key="f")
    again = workflows.create_flow_once("nightly", key="f")
    assert (first.created, again.created) == (True, False)
    assert first.value.pk == again.value.pk
