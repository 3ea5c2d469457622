"""Issue #35, point 8: status codes say who created. Of racing identical creates exactly
one request gets ``201``; the others ``200`` with the same body. Real concurrent
requests, each thread on its own database connection.

For runs started by idempotency key (``start_run_once``), signals sent with one
(``send_signal_once``) or by token (``send_signal_with_token_once``), flows created by
key (``create_flow_once``), flow members by name (``add_to_flow_once``) and edges by
their two ends (``add_dependency_once``)."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

import workflows
from tests.support.workflows import Work
from workflows import WaitForSignal, Workflow
from workflows.models import Flow, FlowEdge, FlowMember, Run, Signal

RACERS = 8


class Awaiting(Workflow):
    name = "created_status_awaiting"
    approved = WaitForSignal("approved")


def token_of(api: Any, role: str) -> str:
    """The token of ``role``'s user, which the ``api`` fixture creates."""
    api(role)
    return Token.objects.get(user__username=f"{role}-user").key


def client(token: str) -> APIClient:
    made = APIClient()
    made.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return made


def test_a_repeat_start_by_key_is_200_and_the_first_201(api, db):
    body = {"workflow": Work.name, "input": {"n": 1}, "idempotency_key": "order-1"}
    first = api("starter").post("/api/runs/", body, format="json")
    again = api("starter").post("/api/runs/", body, format="json")
    assert (first.status_code, again.status_code) == (201, 200), again.content
    assert first.json()["id"] == again.json()["id"]


def test_start_run_once_says_which_call_created_the_run(db):
    first = workflows.start_run_once(Work, {"n": 2}, idempotency_key="order-2")
    again = workflows.start_run_once(Work, {"n": 2}, idempotency_key="order-2")
    assert (first.created, again.created) == (True, False)
    assert first.value.pk == again.value.pk
    assert isinstance(first, workflows.Created)
    assert workflows.start_run(Work, {"n": 2}, idempotency_key="order-2").pk == first.value.pk


@pytest.mark.django_db(transaction=True)
def test_racing_starts_with_one_key_have_exactly_one_201(api, concurrently):
    token = token_of(api, "starter")
    for round_number in range(3):
        body = {
            "workflow": Work.name,
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
    token = token_of(api, "operator")
    for round_number in range(3):
        run = workflows.start_run(Awaiting)
        body = {"name": "approved", "payload": {"ok": round_number}, "idempotency_key": "k-1"}
        answers = racing_answers(concurrently, token, f"/api/runs/{run.pk}/signals/", body)
        assert sorted(status for status, _ in answers) == [200] * (RACERS - 1) + [201], answers
        assert all(answer == answers[0][1] for _, answer in answers)  # the same body
        assert Signal.objects.filter(run=run).count() == 1


@pytest.mark.django_db(transaction=True)
def test_racing_sends_of_one_signal_token_have_exactly_one_201(concurrently):
    """The token is its own idempotency key: of racing sends exactly one creates."""
    for round_number in range(3):
        run = workflows.start_run(Awaiting)
        body = {"token": workflows.signal_token(run, "approved"), "payload": {"n": round_number}}

        def send(body=body):
            response = APIClient().post("/api/signals/by-token/", body, format="json")
            return response.status_code, response.json()

        answers = concurrently(*[send] * RACERS)
        assert not [a for a in answers if isinstance(a, Exception)], answers
        assert sorted(status for status, _ in answers) == [200] * (RACERS - 1) + [201], answers
        assert all(answer == answers[0][1] for _, answer in answers)
        assert Signal.objects.filter(run=run).count() == 1


def test_send_signal_with_token_once_says_which_call_created_the_signal(db):
    run = workflows.start_run(Awaiting)
    token = workflows.signal_token(run, "approved")
    first = workflows.send_signal_with_token_once(token, {"ok": 1})
    again = workflows.send_signal_with_token_once(token, {"ok": 1})
    assert (first.created, again.created) == (True, False)
    assert first.value.pk == again.value.pk


def test_send_signal_once_says_which_call_created_the_signal(db):
    run = workflows.start_run(Awaiting)
    first = workflows.send_signal_once(run, "approved", {"ok": 1}, idempotency_key="s")
    again = workflows.send_signal_once(run, "approved", {"ok": 1}, idempotency_key="s")
    assert (first.created, again.created) == (True, False)
    assert first.value.pk == again.value.pk


@pytest.mark.django_db(transaction=True)
def test_racing_flow_creations_with_one_key_have_exactly_one_201(api, concurrently):
    token = token_of(api, "starter")
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


def without_read_time(answer: dict) -> dict:
    """A run's body without what says when it was read (``as_of``, ``explain``)."""
    return {key: value for key, value in answer.items() if key not in ("as_of", "explain")}


@pytest.mark.django_db(transaction=True)
def test_racing_adds_of_one_member_have_exactly_one_201(api, concurrently):
    token = token_of(api, "starter")
    for round_number in range(3):
        flow = workflows.create_flow(f"members-{round_number}")
        workflows.add_to_flow(flow, Work, {"n": 0}, member="first")
        body = {
            "workflow": Work.name,
            "member": "second",
            "input": {"n": round_number},
            "after": ["first"],
        }
        answers = racing_answers(concurrently, token, f"/api/flows/{flow.pk}/members/", body)
        assert sorted(status for status, _ in answers) == [200] * (RACERS - 1) + [201], answers
        bodies = [without_read_time(answer) for _, answer in answers]
        assert all(b == bodies[0] for b in bodies), bodies  # the same run, the same body
        assert FlowMember.objects.filter(flow=flow, name="second").count() == 1
        assert Run.objects.filter(flow_id=flow.pk).count() == 2
        flow.refresh_from_db()
        assert flow.revision == 2  # one member added after the first, not eight


@pytest.mark.django_db(transaction=True)
def test_racing_stagings_of_one_edge_have_exactly_one_201(api, concurrently):
    token = token_of(api, "starter")
    for round_number in range(3):
        flow = workflows.create_flow(f"edges-{round_number}")
        workflows.add_to_flow(flow, Work, {"n": 1}, member="left")
        workflows.add_to_flow(flow, Work, {"n": 2}, member="right")
        workflows.add_to_flow(flow, Work, {"n": 3}, member="sink", after=["left"])
        flow.refresh_from_db()
        read_at = flow.revision
        # Every racer staged against the revision it read: the losers find the winner's
        # edge (200, the same revision), not a stale revision (409).
        body = {"upstream": "right", "downstream": "sink", "expected_revision": read_at}
        answers = racing_answers(concurrently, token, f"/api/flows/{flow.pk}/edges/", body)
        assert sorted(status for status, _ in answers) == [200] * (RACERS - 1) + [201], answers
        assert all(answer == answers[0][1] for _, answer in answers), answers
        assert answers[0][1] == {"flow": str(flow.pk), "revision": read_at + 1}
        edges = FlowEdge.objects.filter(flow=flow, upstream__name="right", downstream__name="sink")
        assert edges.count() == 1


def test_add_to_flow_once_says_which_call_created_the_member(db):
    flow = workflows.create_flow("once")
    first = workflows.add_to_flow_once(flow, Work, {"n": 1}, member="m")
    again = workflows.add_to_flow_once(flow, Work, {"n": 1}, member="m")
    assert (first.created, again.created) == (True, False)
    assert isinstance(first, workflows.Created)
    assert first.value.pk == again.value.pk
    assert workflows.add_to_flow(flow, Work, {"n": 1}, member="m").pk == first.value.pk


def test_add_dependency_once_says_which_call_created_the_edge(db):
    flow = workflows.create_flow("once")
    workflows.add_to_flow(flow, Work, {"n": 1}, member="up")
    workflows.add_to_flow(flow, Work, {"n": 2}, member="other")
    workflows.add_to_flow(flow, Work, {"n": 3}, member="down", after=["other"])
    first = workflows.add_dependency_once(flow, "up", "down")
    again = workflows.add_dependency_once(flow, "up", "down")
    assert (first.created, again.created) == (True, False)
    assert first.value == again.value  # the revision the edge was staged at
    assert workflows.add_dependency(flow, "up", "down") == first.value


def test_a_repeat_member_and_edge_over_the_api_are_200(api, db):
    flow = workflows.create_flow("repeats")
    workflows.add_to_flow(flow, Work, {"n": 1}, member="up")
    member = {"workflow": Work.name, "member": "down", "input": {"n": 2}, "after": ["up"]}
    first = api("starter").post(f"/api/flows/{flow.pk}/members/", member, format="json")
    again = api("starter").post(f"/api/flows/{flow.pk}/members/", member, format="json")
    assert (first.status_code, again.status_code) == (201, 200), again.content
    assert first.json()["id"] == again.json()["id"]
    workflows.add_to_flow(flow, Work, {"n": 3}, member="side")
    edge = {"upstream": "side", "downstream": "down"}
    first = api("starter").post(f"/api/flows/{flow.pk}/edges/", edge, format="json")
    again = api("starter").post(f"/api/flows/{flow.pk}/edges/", edge, format="json")
    assert (first.status_code, again.status_code) == (201, 200), again.content
    assert first.json() == again.json()
