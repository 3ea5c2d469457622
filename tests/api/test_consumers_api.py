"""Reads write nothing: an event consumer is created on purpose, by a caller allowed to
manage consumers, and can be listed, read and deleted (``/api/events/consumers/``).

``GET /api/events/?consumer=NAME`` of an unknown name is a 404 and leaves no row; a
first acknowledgement creates the consumer only for a caller holding
``workflows.manage_consumers``; racing creates of one name get exactly one 201.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.core.exceptions import PermissionDenied
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

import workflows
from tests.api.test_api_basics import assert_error
from tests.support.threads import run_concurrently
from workflows.errors import ConsumerNotFound
from workflows.models import Event, EventConsumer, Run

CONSUMERS = "/api/events/consumers/"


def _event() -> Event:
    run = Run.objects.create(workflow_name="consumers_api", workflow_version=1, snapshot={})
    return Event.objects.create(run=run, type="happened")


def _create(api, name: str, role: str = "manager"):
    return api(role).post(CONSUMERS, {"name": name}, format="json")


@pytest.mark.django_db
class TestReadsWriteNothing:
    def test_reading_an_unknown_consumer_is_a_404_and_creates_none(self, api):
        _event()
        for role in ("viewer", "operator", "manager"):
            response = api(role).get("/api/events/", {"consumer": "ghost"})
            error = assert_error(response, 404, "consumer_not_found")
            assert error["details"] == {"consumer": "ghost"}
            # A long poll of an unknown name does not wait either.
            response = api(role).get("/api/events/", {"consumer": "ghost", "wait": "30"})
            assert_error(response, 404, "consumer_not_found")
        assert not EventConsumer.objects.exists()

    def test_many_names_read_leave_no_row(self, api):
        for n in range(200):
            api("viewer").get("/api/events/", {"consumer": f"scan-{n}"})
        assert not EventConsumer.objects.exists()
        assert api("viewer").get(CONSUMERS).json() == {"results": []}

    def test_a_first_ack_creates_the_consumer_only_for_a_manager(self, api):
        _event()
        cursor = workflows.consume("seed")[0].cursor
        response = api("operator").post(
            "/api/events/ack/", {"consumer": "fresh", "cursor": cursor}, format="json"
        )
        assert_error(response, 404, "consumer_not_found")
        assert not EventConsumer.objects.filter(name="fresh").exists()
        response = api("manager").post(
            "/api/events/ack/", {"consumer": "fresh", "cursor": cursor}, format="json"
        )
        assert response.status_code == 200, response.content
        assert response.json()["moved"] is True
        # An operator acknowledges an existing consumer, as before.
        response = api("operator").post(
            "/api/events/ack/", {"consumer": "fresh", "cursor": cursor}, format="json"
        )
        assert response.status_code == 200 and response.json()["moved"] is False

    def test_code_still_creates_on_first_consume(self, db):
        _event()
        assert len(workflows.consume("in-code")) == 1
        assert EventConsumer.objects.filter(name="in-code").exists()
        with pytest.raises(ConsumerNotFound):
            workflows.consume("not-in-code", create=False)
        assert not EventConsumer.objects.filter(name="not-in-code").exists()


@pytest.mark.django_db
class TestManagingConsumers:
    def test_create_read_list_delete(self, api):
        first = _event()
        created = _create(api, "billing")
        assert created.status_code == 201, created.content
        body = created.json()
        assert set(body) == {
            "name",
            "cursor",
            "lag",
            "acked_at",
            "created_at",
            "workflows",
            "kinds",
        }
        assert body["name"] == "billing" and body["lag"] == 1 and body["acked_at"] is None
        again = _create(api, "billing")
        assert again.status_code == 200 and again.json() == body
        events = api("viewer").get("/api/events/", {"consumer": "billing"}).json()["events"]
        assert [event["id"] for event in events] == [first.pk]
        assert api("viewer").get(f"{CONSUMERS}billing/").json() == body
        _create(api, "audit/eu")  # a name with a slash is addressed as it is
        listed = api("viewer").get(CONSUMERS).json()["results"]
        assert [row["name"] for row in listed] == ["audit/eu", "billing"]
        deleted = api("manager").delete(f"{CONSUMERS}billing/")
        assert deleted.status_code == 200 and deleted.json() == body
        assert not EventConsumer.objects.filter(name="billing").exists()
        assert_error(api("manager").delete(f"{CONSUMERS}billing/"), 404, "consumer_not_found")
        assert_error(api("viewer").get(f"{CONSUMERS}billing/"), 404, "consumer_not_found")
        assert api("manager").delete(f"{CONSUMERS}audit/eu/").status_code == 200
        # The events stay: they belong to their runs.
        assert Event.objects.filter(pk=first.pk).exists()

    def test_a_name_with_a_line_break_is_addressed_like_any_other(self, api):
        """Found by the schema fuzzer: such a name matched no route and got Django's HTML
        404. It is the API's JSON 404 while unknown, and the consumer once created."""
        for method in ("get", "delete"):
            response = getattr(api("manager"), method)(f"{CONSUMERS}line%0Abreak/")
            assert_error(response, 404, "consumer_not_found")
        workflows.create_consumer("line\nbreak")
        response = api("viewer").get(f"{CONSUMERS}line%0Abreak/")
        assert response.status_code == 200 and response.json()["name"] == "line\nbreak"

    @pytest.mark.parametrize(
        ("role", "method", "path", "status", "code"),
        [
            ("anonymous", "get", CONSUMERS, 401, "not_authenticated"),
            ("nobody", "get", CONSUMERS, 403, "permission_denied"),
            ("nobody", "get", f"{CONSUMERS}kept/", 403, "permission_denied"),
            ("viewer", "post", CONSUMERS, 403, "permission_denied"),
            ("operator", "post", CONSUMERS, 403, "permission_denied"),
            ("operator", "delete", f"{CONSUMERS}kept/", 403, "permission_denied"),
            ("anonymous", "delete", f"{CONSUMERS}kept/", 401, "not_authenticated"),
        ],
    )
    def test_managing_needs_the_permission(self, api, role, method, path, status, code):
        workflows.create_consumer("kept")
        response = getattr(api(role), method)(path, {"name": "new"}, format="json")
        error = assert_error(response, status, code)
        if status == 403 and method != "get":
            assert "workflows.manage_consumers" in error["message"]
        assert sorted(EventConsumer.objects.values_list("name", flat=True)) == ["kept"]

    @pytest.mark.parametrize("name", ["", "   ", "x" * 201, "a\x00b", 5])
    def test_a_bad_name_is_a_400(self, api, name):
        response = api("manager").post(CONSUMERS, {"name": name}, format="json")
        assert "name" in assert_error(response, 400, "validation_error")["details"]
        assert not EventConsumer.objects.exists()

    def test_a_named_user_must_hold_the_permission_in_code(self, db):
        viewer = User.objects.create_user("viewer-only")
        viewer.user_permissions.add(Permission.objects.get(codename="view_run"))
        with pytest.raises(PermissionDenied, match="manage_consumers"):
            workflows.create_consumer("c", user=viewer)
        workflows.create_consumer("c")
        with pytest.raises(PermissionDenied):
            workflows.delete_consumer("c", user=viewer)
        workflows.delete_consumer("c")
        with pytest.raises(ConsumerNotFound):
            workflows.delete_consumer("c")


def _manager_client(name: str) -> APIClient:
    user = User.objects.create_user(name)
    user.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_run", "manage_consumers"])
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.mark.django_db(transaction=True)
def test_racing_creates_get_one_201_and_racing_deletes_one_200():
    clients = [_manager_client(f"m{n}") for n in range(4)]
    results = run_concurrently(
        *(lambda c=c: c.post(CONSUMERS, {"name": "raced"}, format="json") for c in clients)
    )
    statuses = sorted(result.status_code for result in results)
    assert statuses == [200, 200, 200, 201], [getattr(r, "content", r) for r in results]
    assert len({str(result.json()) for result in results}) == 1
    assert EventConsumer.objects.filter(name="raced").count() == 1
    results = run_concurrently(*(lambda c=c: c.delete(f"{CONSUMERS}raced/") for c in clients))
    assert sorted(result.status_code for result in results) == [200, 404, 404, 404]
    assert not EventConsumer.objects.exists()


@pytest.mark.django_db
class TestFilters:
    def test_a_consumer_created_with_a_filter_shows_it_and_reads_through_it(self, api):
        run = Run.objects.create(workflow_name="billing", workflow_version=1, snapshot={})
        completed = Event.objects.create(run=run, type="run.completed")
        Event.objects.create(run=run, type="step.completed")
        response = api("manager").post(
            CONSUMERS,
            {"name": "done", "workflows": ["billing"], "kinds": ["run.completed"]},
            format="json",
        )
        assert response.status_code == 201, response.content
        body = response.json()
        assert (body["workflows"], body["kinds"], body["lag"]) == (
            ["billing"],
            ["run.completed"],
            1,
        )
        assert api("viewer").get(f"{CONSUMERS}done/").json()["kinds"] == ["run.completed"]
        events = api("viewer").get("/api/events/", {"consumer": "done"}).json()
        assert [event["id"] for event in events["events"]] == [completed.pk]

    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ({"kinds": ["run.finished"]}, "kinds"),
            ({"workflows": [" "]}, "workflows"),
            ({"workflows": "billing"}, "workflows"),
        ],
    )
    def test_a_bad_filter_is_a_400_naming_the_field(self, api, body, field):
        response = api("manager").post(CONSUMERS, {"name": "c", **body}, format="json")
        error = assert_error(response, 400, "validation_error")
        assert field in error["details"]
        assert not EventConsumer.objects.exists()

    def test_an_existing_name_with_another_filter_is_a_400(self, api):
        workflows.create_consumer("c", kinds=["run.failed"])
        response = api("manager").post(CONSUMERS, {"name": "c"}, format="json")
        error = assert_error(response, 400, "validation_error")
        assert "another filter" in error["details"]["name"][0]
