"""Flows over HTTP: create (idempotent by key), list, read the graph, add members, edges
and joins, seal, cancel; who may do which; each refusal (bad bodies, unknown flows,
stale revisions, changes the graph refuses); the schema's examples run in order."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import schemathesis

import workflows
from tests.support.verb_access import asked as asked  # a fixture, requested by name
from tests.support.workflows import Broken, Held, Work
from workflows.api import flows as flow_api
from workflows.models import Flow, FlowEdge, Run
from workflows.services.access import BUILD_FLOWS, OPERATE_RUNS, VERBS
from workflows.testing import run_pending

from .schema_doc import api_schema as served_schema, operation_at, request_errors
from .test_api_basics import assert_error
from .test_api_fuzz import (
    FUZZING,
    api_schema as api_schema,  # a fixture, requested by name
    call_checked,
)

pytestmark = pytest.mark.django_db


def create(api: Any, body: dict[str, Any], role: str = "starter") -> Any:
    return api(role).post("/api/flows/", body, format="json")


def post(api: Any, flow: str, verb: str, body: Any, role: str = "starter") -> Any:
    return api(role).post(f"/api/flows/{flow}/{verb}/", body, format="json")


def member(name: str, *, after: tuple[str, ...] = (), workflow: str = Work.name, **extra: Any):
    return {"workflow": workflow, "member": name, "after": list(after), **extra}


@pytest.fixture
def flow(api) -> str:
    response = create(api, {"name": "nightly"})
    assert response.status_code == 201, response.content
    return response.json()["id"]


def graph(api: Any, flow: str) -> dict[str, Any]:
    response = api("viewer").get(f"/api/flows/{flow}/")
    assert response.status_code == 200, response.content
    return response.json()


# Creating flows.


def test_a_flow_is_created_with_201_and_its_key_makes_it_idempotent(api):
    first = create(api, {"name": "nightly", "key": "N-1"})
    assert first.status_code == 201, first.content
    body = first.json()
    assert (body["name"], body["key"], body["status"], body["revision"]) == (
        "nightly",
        "N-1",
        "open",
        0,
    )
    assert (body["members"], body["edges"], body["summary"]) == ([], [], {})

    again = create(api, {"name": "nightly", "key": "N-1"})
    assert again.status_code == 200, again.content
    assert again.json()["id"] == body["id"]
    assert Flow.objects.count() == 1

    other = create(api, {"name": "weekly", "key": "N-1"})
    error = assert_error(other, 409, "idempotency_conflict")
    assert error["details"]["flow"] == body["id"]


def test_flows_without_a_key_are_each_new(api):
    ids = {create(api, {"name": "adhoc"}).json()["id"] for _ in range(2)}
    assert len(ids) == 2


# Reading flows.


def test_the_flow_shows_members_edges_joins_and_revision(api, flow):
    assert post(api, flow, "members", member("a")).status_code == 201
    assert post(api, flow, "members", member("b")).status_code == 201
    assert post(api, flow, "members", member("c", after=("a", "b"), join=1)).status_code == 201
    body = graph(api, flow)
    assert body["revision"] == 3
    runs = {row["name"]: row for row in body["members"]}
    assert [row["name"] for row in body["members"]] == ["a", "b", "c"]
    assert runs["c"]["status"] == "blocked"
    assert (runs["c"]["join"], runs["c"]["upstream"], runs["c"]["workflow"]) == (
        1,
        ["a", "b"],
        Work.name,
    )
    assert runs["a"]["join"] == "all" and runs["a"]["upstream"] == []
    assert Run.objects.get(pk=runs["c"]["run_id"]).flow_id == uuid.UUID(flow)
    assert body["edges"] == [
        {"upstream": "a", "downstream": "c"},
        {"upstream": "b", "downstream": "c"},
    ]
    assert body["counts"]["blocked"] == 1


def test_flows_are_listed_newest_first_by_page_and_filtered_by_status(api, flow):
    second = create(api, {"name": "second"}).json()["id"]
    post(api, second, "seal", {})
    page = api("viewer").get("/api/flows/", {"page_size": 1})
    assert page.status_code == 200, page.content
    assert [row["id"] for row in page.json()["results"]] == [second]
    rest = api("viewer").get(page.json()["next"])
    assert [row["id"] for row in rest.json()["results"]] == [flow]

    opened = api("viewer").get("/api/flows/", {"status": "open"}).json()["results"]
    assert [(row["id"], row["members"], row["unfinished"]) for row in opened] == [(flow, 0, 0)]
    assert_error(api("viewer").get("/api/flows/", {"status": "shut"}), 400, "validation_error")


def test_an_unknown_or_malformed_flow_is_not_found(api, flow):
    for pk in (uuid.uuid4(), flow.replace("-", ""), f"{{{flow}}}", "12"):
        assert_error(api("viewer").get(f"/api/flows/{pk}/"), 404, "flow_not_found")
        assert_error(post(api, str(pk), "members", member("a")), 404, "flow_not_found")
        assert_error(post(api, str(pk), "cancel", {}, "operator"), 404, "flow_not_found")


# Members.


def test_a_member_is_added_with_201_and_its_run_and_a_repeat_is_200(api, flow):
    first = post(api, flow, "members", member("a", input={"n": 1}))
    assert first.status_code == 201, first.content
    run = first.json()
    assert run["workflow"] == Work.name and run["status"] in ("pending", "running")
    again = post(api, flow, "members", member("a", input={"n": 1}))
    assert (again.status_code, again.json()["id"]) == (200, run["id"])

    waiting = post(api, flow, "members", member("b", after=("a",)))
    assert (waiting.status_code, waiting.json()["status"]) == (201, "blocked")
    run_pending()
    statuses = {row["name"]: row["status"] for row in graph(api, flow)["members"]}
    assert statuses == {"a": "completed", "b": "completed"}


def test_a_member_refused(api, flow):
    post(api, flow, "members", member("a", input={"n": 1}))
    conflict = assert_error(
        post(api, flow, "members", member("a", input={"n": 2})), 409, "idempotency_conflict"
    )
    assert conflict["details"]["member"] == "a"
    assert_error(
        post(api, flow, "members", member("b", workflow="no_such_workflow")),
        404,
        "workflow_not_found",
    )
    unknown = assert_error(
        post(api, flow, "members", member("b", after=("nobody",))), 409, "invalid_flow_change"
    )
    assert "nobody" in unknown["message"]
    assert_error(post(api, flow, "members", member("   ")), 400, "invalid_input")
    assert graph(api, flow)["revision"] == 1


# Edges.


def test_an_edge_answers_the_new_revision_and_a_repeat_the_same(api, flow):
    for name in ("a", "b"):
        post(api, flow, "members", member(name))
    post(api, flow, "members", member("c", after=("a",)))
    body = {"upstream": "b", "downstream": "c", "expected_revision": 3}
    staged = post(api, flow, "edges", body)
    assert (staged.status_code, staged.json()) == (201, {"flow": flow, "revision": 4})
    again = post(api, flow, "edges", {"upstream": "b", "downstream": "c"})
    assert (again.status_code, again.json()["revision"]) == (200, 4)
    assert FlowEdge.objects.filter(flow_id=flow).count() == 2


def test_an_edge_staged_on_a_stale_revision_is_409_with_the_current_one(api, flow):
    for name in ("a", "b"):
        post(api, flow, "members", member(name))
    post(api, flow, "members", member("c", after=("a",)))
    stale = post(api, flow, "edges", {"upstream": "b", "downstream": "c", "expected_revision": 2})
    error = assert_error(stale, 409, "stale_revision")
    assert (error["details"]["revision"], error["details"]["expected_revision"]) == (3, 2)
    assert graph(api, flow)["revision"] == 3
    assert FlowEdge.objects.filter(flow_id=flow).count() == 1


def test_edges_the_graph_refuses_are_409_invalid_flow_change(api, flow):
    post(api, flow, "members", member("a"))
    post(api, flow, "members", member("b", after=("a",)))
    post(api, flow, "members", member("c", after=("b",)))
    post(api, flow, "members", member("d"))  # no upstream: it started at once
    cases = {
        ("a", "a"): "itself",
        ("c", "a"): "cycle",
        ("b", "d"): "has started",
        ("a", "zed"): "no member",
    }
    for (up, down), words in cases.items():
        error = assert_error(
            post(api, flow, "edges", {"upstream": up, "downstream": down}),
            409,
            "invalid_flow_change",
        )
        assert words in error["message"], (up, down, error)
    assert graph(api, flow)["revision"] == 4


# Joins.


def test_a_join_is_set_on_a_blocked_member_and_refused_once_it_started(api, flow):
    post(api, flow, "members", member("a", workflow=Held.name))
    post(api, flow, "members", member("b", workflow=Held.name))
    post(api, flow, "members", member("c", after=("a", "b")))
    changed = post(api, flow, "joins", {"member": "c", "join": "any"})
    assert (changed.status_code, changed.json()) == (200, {"flow": flow, "revision": 4})
    assert graph(api, flow)["members"][2]["join"] == "any"
    started = post(api, flow, "joins", {"member": "a", "join": 2})
    assert "has started" in assert_error(started, 409, "invalid_flow_change")["message"]


# Only verbs end members (issue #35 point 3).


def test_an_edit_that_would_cancel_a_member_is_409_for_a_start_only_user(api, flow):
    post(api, flow, "members", member("bad", workflow=Broken.name))
    post(api, flow, "members", member("gate", workflow=Held.name))
    post(api, flow, "members", member("down", after=("gate",)))
    run_pending()
    # The starter may not cancel (403) and may not cancel by an edit either (409).
    assert_error(post(api, flow, "cancel", {}, "starter"), 403, "permission_denied")
    edge = post(api, flow, "edges", {"upstream": "bad", "downstream": "down"})
    problem = assert_error(edge, 409, "invalid_flow_change")
    assert "would cancel member 'down'" in problem["message"]
    late = post(api, flow, "members", member("late", after=("bad",)))
    assert "'late'" in assert_error(late, 409, "invalid_flow_change")["message"]
    assert post(api, flow, "joins", {"member": "down", "join": 2147483647}).status_code == 200
    sealed = post(api, flow, "seal", {})
    assert "seal_flow would cancel" in assert_error(sealed, 409, "invalid_flow_change")["message"]
    body = graph(api, flow)
    statuses = {row["name"]: row["status"] for row in body["members"]}
    assert (body["status"], statuses["down"]) == ("open", "blocked")
    assert "late" not in statuses


# Sealing and cancelling.


def test_a_sealed_flow_ends_and_takes_no_more_members(api, flow):
    post(api, flow, "members", member("a"))
    post(api, flow, "members", member("b", after=("a",), workflow=Broken.name))
    post(api, flow, "members", member("c", after=("b",)))
    sealed = post(api, flow, "seal", {})
    assert (sealed.status_code, sealed.json()["status"]) == (200, "sealed")
    assert post(api, flow, "seal", None).json()["status"] == "sealed"  # a repeat
    assert_error(post(api, flow, "members", member("d")), 409, "invalid_flow_change")
    run_pending()
    body = graph(api, flow)
    statuses = {row["name"]: row["status"] for row in body["members"]}
    assert (body["status"], statuses) == (
        "failed",
        {"a": "completed", "b": "failed", "c": "cancelled"},
    )
    assert body["members"][2]["error"]["code"] == "dependency_failed"
    assert_error(post(api, flow, "cancel", {}, "operator"), 409, "invalid_state")


def test_cancel_applies_its_policy_and_a_repeat_changes_nothing(api, flow):
    post(api, flow, "members", member("a", workflow=Held.name))
    post(api, flow, "members", member("b", after=("a",)))
    run_pending()
    body = {"policy": "cancel_pending", "reason": "moved to tomorrow"}
    cancelled = post(api, flow, "cancel", body, "operator")
    assert cancelled.status_code == 200, cancelled.content
    answer = cancelled.json()
    statuses = {row["name"]: row["status"] for row in answer["flow"]["members"]}
    assert (answer["cancelled"], answer["flow"]["status"]) == (1, "cancelled")
    assert statuses == {"a": "waiting", "b": "cancelled"}
    assert (answer["policy"], answer["reason"], answer["by"]) == (
        "cancel_pending",
        "moved to tomorrow",
        "operator-user",
    )
    assert (answer["members"], answer["complete"]) == (["b"], True)
    # A repeat answers with the stored cancellation; another policy is refused.
    again = post(api, flow, "cancel", body, "operator")
    assert (again.status_code, again.json()["cancelled"]) == (200, 1)
    other = post(api, flow, "cancel", {"policy": "cancel_all"}, "operator")
    assert "cancel_pending" in assert_error(other, 409, "invalid_state")["message"]
    assert_error(post(api, flow, "seal", {}), 409, "invalid_state")
    closed = post(api, flow, "edges", {"upstream": "b", "downstream": "a"})
    assert "cancelled" in assert_error(closed, 409, "invalid_flow_change")["message"]


def test_cancel_all_cancels_every_member_not_ended(api, flow):
    post(api, flow, "members", member("a", workflow=Held.name))
    post(api, flow, "members", member("b", after=("a",)))
    run_pending()
    answer = post(api, flow, "cancel", None, "operator").json()
    run_pending()
    members = {row["name"]: row for row in graph(api, flow)["members"]}
    assert {name: row["status"] for name, row in members.items()} == {
        "a": "cancelled",
        "b": "cancelled",
    }
    # The blocked member is cancelled first, for the flow's reason, and counted.
    assert members["b"]["error"]["code"] == "flow_cancelled"
    assert answer["cancelled"] == 2


# Who may do what.


@pytest.mark.parametrize(
    ("verb", "body"),
    [
        ("members", member("a")),
        ("edges", {"upstream": "a", "downstream": "b"}),
        ("joins", {"member": "a", "join": "any"}),
        ("seal", {}),
    ],
)
def test_building_a_flow_needs_start_run(api, flow, verb, body):
    for role in ("viewer", "operator"):
        assert_error(post(api, flow, verb, body, role), 403, "permission_denied")
    assert_error(create(api, {"name": "x"}, "operator"), 403, "permission_denied")
    assert graph(api, flow)["revision"] == 0


def test_a_refused_flow_change_says_what_is_refused_why_and_the_permission(api):
    refusal = assert_error(create(api, {"name": "x"}, "operator"), 403, "permission_denied")
    assert refusal["message"] == (
        "Creating or changing a flow is refused: a flow starts its members as runs, so it "
        "needs the permission workflows.start_run."
    )


def test_cancelling_needs_operate_run_and_reading_view_run(api, flow):
    for role in ("viewer", "starter"):
        assert_error(post(api, flow, "cancel", {}, role), 403, "permission_denied")
    assert graph(api, flow)["status"] == "open"
    assert_error(api("nobody").get(f"/api/flows/{flow}/"), 403, "permission_denied")
    assert_error(api("nobody").get("/api/flows/"), 403, "permission_denied")
    assert_error(api("anonymous").get("/api/flows/"), 401, "not_authenticated")


def test_each_flow_endpoint_asks_its_row_of_the_verb_table(api, flow, asked):
    rows = {
        "members": "add_to_flow",
        "edges": "add_dependency",
        "joins": "set_join",
        "seal": "seal_flow",
        "cancel": "cancel_flow",
    }
    for verb, name in rows.items():
        asked.clear()
        post(api, flow, verb, {}, "operator")
        assert asked == [VERBS[name]], verb
    asked.clear()
    create(api, {"name": "x"})
    assert asked == [VERBS["create_flow"]] == [BUILD_FLOWS]
    assert VERBS["cancel_flow"] is OPERATE_RUNS


# Bodies that must be refused, each naming its field.

NUL = "a\x00b"
EDGE = {"upstream": "a", "downstream": "b"}
BAD_BODIES = [
    ("", {"name": "x", "colour": "red"}, "colour"),
    ("", {"name": 7}, "name"),
    ("", {"name": NUL}, "name"),
    ("", {"name": "x", "key": ""}, "key"),
    ("", {"name": "x" * 201}, "name"),
    ("", {}, "name"),
    ("members", {"workflow": Work.name}, "member"),
    ("members", {**member("a"), "after": "b"}, "after"),
    ("members", member("a", after=(NUL,)), "after"),
    ("members", member("a", join="some"), "join"),
    ("members", member("a", join=0), "join"),
    ("members", member("a", join=True), "join"),
    ("members", member("a", join=2**31), "join"),
    ("members", member(NUL), "member"),
    ("members", {**member("a"), "workflow": ["x"]}, "workflow"),
    ("edges", {**EDGE, "expected_revision": "3"}, "expected_revision"),
    ("edges", {**EDGE, "expected_revision": -1}, "expected_revision"),
    ("edges", {**EDGE, "expected_revision": 2**40}, "expected_revision"),
    ("edges", {"upstream": "a"}, "downstream"),
    ("edges", {"upstream": 1, "downstream": "b"}, "upstream"),
    ("joins", {"member": "a"}, "join"),
    ("joins", {"member": "a", "join": 1.5}, "join"),
    ("seal", {"force": True}, "force"),
    ("cancel", {"policy": "everything"}, "policy"),
    ("cancel", {"policy": 1}, "policy"),
    ("cancel", {"reason": NUL}, "reason"),
]


@pytest.mark.parametrize(("verb", "body", "field"), BAD_BODIES)
def test_a_bad_body_is_a_400_naming_its_field(api, flow, verb, body, field):
    url = f"/api/flows/{flow}/{verb}/" if verb else "/api/flows/"
    role = "operator" if verb == "cancel" else "starter"
    response = api(role).post(url, body, format="json")
    error = assert_error(response, 400, "validation_error")
    assert field in error["details"], error
    assert graph(api, flow)["revision"] == 0


def test_a_body_that_is_not_an_object_is_a_400(api, flow):
    for body in ([], "x", 3):
        assert_error(post(api, flow, "members", body), 400, "validation_error")


# The schema.


def test_every_flow_operation_is_in_the_schema_with_its_statuses():
    schema = served_schema()
    expected = {
        ("get", "/api/flows/"): {"200"},
        ("post", "/api/flows/"): {"200", "201", "409"},
        ("get", "/api/flows/{id}/"): {"200", "404"},
        ("post", "/api/flows/{id}/members/"): {"200", "201", "404", "409"},
        ("post", "/api/flows/{id}/edges/"): {"200", "201", "404", "409"},
        ("post", "/api/flows/{id}/joins/"): {"200", "404", "409"},
        ("post", "/api/flows/{id}/seal/"): {"200", "404", "409"},
        ("post", "/api/flows/{id}/cancel/"): {"200", "404", "409"},
    }
    found = {
        (method, path): set(operation["responses"])
        for path, item in schema["paths"].items()
        if path.startswith("/api/flows/")
        for method, operation in item.items()
    }
    assert set(found) == set(expected)
    for operation, statuses in expected.items():
        assert statuses | {"400", "401", "403"} <= found[operation], operation
    components = schema["components"]["schemas"]
    status = components["FlowDetail"]["properties"]["status"]["$ref"].rsplit("/", 1)[1]
    assert components[status]["enum"] == [
        "open",
        "sealed",
        "completed",
        "failed",
        "cancelled",
    ]
    edges = operation_at(schema, "post", f"/api/flows/{uuid.uuid4()}/edges/")
    assert request_errors(schema, edges, {**EDGE, "x": 1})
    assert request_errors(schema, edges, {**EDGE, "expected_revision": -1})
    members = operation_at(schema, "post", f"/api/flows/{uuid.uuid4()}/members/")
    for join in ("all", "any", 3):
        assert not request_errors(schema, members, member("a", join=join)), join
    for join in ("some", 0, True, 1.5):
        assert request_errors(schema, members, member("a", join=join)), join


def test_the_schema_examples_build_a_flow_of_the_demo_workflows_in_order(api):
    created = create(api, flow_api.CREATE_FLOW)
    assert created.status_code == 201, created.content
    flow = created.json()["id"]
    for body in (flow_api.ADD_ORDER, flow_api.ADD_DISPATCH, flow_api.ADD_IMPORT):
        assert post(api, flow, "members", body).status_code == 201, body
    staged = post(api, flow, "edges", flow_api.ADD_EDGE)
    assert staged.status_code == 201, staged.content
    assert post(api, flow, "joins", flow_api.SET_JOIN).status_code == 200
    cancelled = post(api, flow, "cancel", flow_api.CANCEL_FLOW, "operator")
    assert (cancelled.status_code, cancelled.json()["cancelled"]) == (200, 1)
    assert create(api, flow_api.CREATE_FLOW).status_code == 200


# Fuzzing with a real flow: the whole-schema fuzz (test_api_fuzz.py) walks these
# operations too, but with generated ids that name no flow; here each call names a new
# open flow whose members are those the schema's examples name, so that generated
# bodies reach the engine's checks and the examples stage an edge and change a join.

fuzzed = schemathesis.pytest.from_fixture("api_schema").include(path_regex=r"^/api/flows/\{id\}/")


def open_flow() -> str:
    built = workflows.create_flow("fuzzed")
    for name in ("order", "import"):
        workflows.add_to_flow(built, Held, {}, member=name)
    workflows.add_to_flow(built, Work, {}, member="dispatch", after=["order"])
    return str(built.pk)


@pytest.mark.slow
@fuzzed.parametrize()
@FUZZING
def test_no_flow_operation_on_a_real_flow_answers_5xx_or_off_its_schema(case: Any) -> None:
    case.path_parameters = {**(case.path_parameters or {}), "id": open_flow()}
    response = call_checked(case)
    if response.status_code == 404:  # a workflow the body names, never the flow
        assert response.json()["error"]["code"] != "flow_not_found"
