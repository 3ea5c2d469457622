"""Runs about the host's own objects: ``start_run(subject=...)``, ``Run.objects.for_object``,
the host's ``GenericRelation``, ``RunInline`` on the host's admin, and the API's
``subject`` field and filter."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import include, path, reverse
from rest_framework.test import APIClient

import workflows
from tests.acceptance.flowapp.models import Order, Shipment
from workflows import Gate, SubWorkflow, Task, Workflow
from workflows.admin.registered import RunAdmin, RunInline
from workflows.models import Event, Run
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

HERE = "tests.engine.runs.test_run_subjects"


def reserve(ctx):
    return {"reserved": ctx.input["order"]}


class Fulfil(Workflow):
    """Reserve stock, then wait for someone to approve shipping."""

    name = "subject_fulfil"
    reserve = Task(f"{HERE}.reserve")
    approve = Gate(prompt="Ship order {input[order]}?", after="reserve")


class Refund(Workflow):
    """Refund an order by running the fulfilment again as a child run."""

    name = "subject_refund"
    again = SubWorkflow("subject_fulfil", input=lambda ctx: {"order": ctx.input["order"]})


# A host project's admin: its own site, with runs and its orders (showing their runs).
class OrderAdmin(admin.ModelAdmin):
    inlines = [RunInline]


host_site = admin.AdminSite(name="host")
host_site.register(Run, RunAdmin)
host_site.register(Order, OrderAdmin)
urlpatterns = [
    path("host/", host_site.urls),
    path("admin/", admin.site.urls),
    path("api/", include("workflows.api.urls")),
]


@pytest.fixture(autouse=True)
def host_urls(settings) -> None:
    settings.ROOT_URLCONF = HERE


def fulfil(subject: Any, order: str = "A-1", **kwargs: Any) -> Run:
    return workflows.start_run(Fulfil, {"order": order}, subject=subject, **kwargs)


def order_change_url(order: Order) -> str:
    return reverse("host:acceptance_flowapp_order_change", args=[order.pk])


@pytest.fixture
def superuser() -> User:
    return User.objects.create_superuser("admin-role", password="pw")


# -- starting and finding runs of an object ---------------------------------------------


@pytest.mark.parametrize(
    "make", [lambda: Order.objects.create(number="A-1"), lambda: Shipment.objects.create()]
)
def test_a_run_points_at_its_subject_whatever_the_key_type(make):
    subject = make()
    run = Run.objects.get(pk=fulfil(subject).pk)
    assert run.subject_type == ContentType.objects.get_for_model(subject)
    assert run.subject_id == str(subject.pk)
    assert run.subject == subject
    assert list(Run.objects.filter(subject_type=run.subject_type, subject_id=str(subject.pk))) == [
        run
    ]


def test_for_object_returns_that_objects_runs_newest_first():
    order, other = Order.objects.create(number="A-1"), Order.objects.create(number="A-2")
    first, second = fulfil(order), fulfil(order)
    fulfil(other)
    workflows.start_run(Fulfil, {"order": "none"})
    assert list(Run.objects.for_object(order)) == [second, first]
    assert list(Run.objects.for_object(order).filter(status="running")) == [second, first]


def test_an_object_with_the_same_key_in_another_model_has_none_of_these_runs():
    order = Order.objects.create(number="A-1")
    run = fulfil(order)
    user = User.objects.create_user("clerk", pk=order.pk)
    run_of_user = fulfil(user)
    assert list(Run.objects.for_object(order)) == [run]
    assert list(Run.objects.for_object(user)) == [run_of_user]


@pytest.mark.parametrize("model", [Order, Shipment])
def test_the_hosts_generic_relation_lists_its_runs(model):
    subject = model.objects.create()
    runs = [fulfil(subject), fulfil(subject)]
    fulfil(model.objects.create())
    assert set(subject.runs.all()) == set(runs)
    run_pending()
    assert subject.runs.filter(status="waiting").count() == 2


def test_child_runs_do_not_inherit_the_subject():
    order = Order.objects.create(number="A-1")
    parent = workflows.start_run(Refund, {"order": "A-1"}, subject=order)
    run_pending()
    child = Run.objects.get(parent_run=parent)
    assert child.subject_type is None and child.subject_id == ""
    assert list(Run.objects.for_object(order)) == [parent]


def test_an_idempotent_repeat_returns_the_first_run_whatever_the_subject():
    order, other = Order.objects.create(number="A-1"), Order.objects.create(number="A-2")
    first = fulfil(order, idempotency_key="k-1")
    assert fulfil(order, idempotency_key="k-1") == first
    assert fulfil(other, idempotency_key="k-1") == first
    assert fulfil(None, idempotency_key="k-1") == first
    assert Run.objects.get(pk=first.pk).subject == order
    assert not Run.objects.for_object(other).exists()


@pytest.mark.parametrize(
    ("subject", "problem"),
    [
        (lambda: Order(number="A-1"), "acceptance_flowapp.Order is not saved"),
        (lambda: Shipment(), "acceptance_flowapp.Shipment is not saved"),
        (lambda: {"type": "order", "id": 1}, "got dict"),
        (lambda: "A-1", "got str"),
        (lambda: Order, "got ModelBase"),
    ],
    ids=["unsaved", "unsaved-with-uuid-key", "dict", "str", "model-class"],
)
def test_invalid_subjects_are_refused_with_nothing_written(subject, problem):
    with pytest.raises(workflows.InvalidInput, match=problem):
        fulfil(subject())
    assert not Run.objects.exists()
    assert not Event.objects.exists()


# -- the host's admin: RunInline --------------------------------------------------------


def test_the_inline_shows_the_runs_with_status_link_and_waiting_prompt(client, superuser):
    order = Order.objects.create(number="A-1")
    waiting = fulfil(order, order="A-1")
    run_pending()
    unrelated = fulfil(Order.objects.create(number="A-2"))
    client.force_login(superuser)
    html = client.get(order_change_url(order)).content.decode()
    assert "Runs of this order" in html
    run_page = reverse("host:workflows_run_change", args=[waiting.pk])
    assert f'<a href="{run_page}"><span class="wf-id" title="{waiting.pk}">' in html
    assert "subject_fulfil v1" in html
    assert '<span class="wf-badge st-waiting">waiting</span>' in html
    assert "Ship order A-1?" in html
    assert str(unrelated.pk) not in html
    assert "workflows/console.css" in html


def test_the_inline_costs_the_same_queries_for_one_run_and_twenty(client, superuser):
    client.force_login(superuser)

    def queries_for(runs: int) -> int:
        order = Order.objects.create(number=f"runs-{runs}")
        for _ in range(runs):
            fulfil(order)
        run_pending()
        client.get(order_change_url(order))  # warm the session and content-type caches
        with CaptureQueriesContext(connection) as queries:
            page = client.get(order_change_url(order))
        assert page.content.decode().count("Ship order A-1?") == runs
        return len(queries)

    assert queries_for(1) == queries_for(20)


def test_the_inline_adds_changes_and_deletes_nothing(client, superuser, rf):
    order = Order.objects.create(number="A-1")
    run = fulfil(order)
    request = rf.get("/")
    request.user = superuser
    inline = RunInline(Order, host_site)
    assert not inline.has_add_permission(request, order)
    assert not inline.has_change_permission(request, order)
    assert not inline.has_delete_permission(request, order)
    client.force_login(superuser)
    html = client.get(order_change_url(order)).content.decode()
    assert "DELETE" not in html
    # inlines.js offers no "add another" row when the forms already reach the maximum.
    assert 'name="workflows-run-subject_type-subject_id-MAX_NUM_FORMS" value="0"' in html
    assert 'name="workflows-run-subject_type-subject_id-0-workflow_name"' not in html
    assert Run.objects.get(pk=run.pk).version == run.version


# -- the run page and the API ------------------------------------------------------------


def test_the_run_page_links_to_the_subjects_admin_page(client, superuser):
    order = Order.objects.create(number="A-1")
    run = fulfil(order)
    client.force_login(superuser)
    html = client.get(reverse("host:workflows_run_change", args=[run.pk])).content.decode()
    assert f'about <a href="{order_change_url(order)}">order {order.pk}</a>' in html
    # The project's own admin does not register orders: the subject is named, unlinked.
    html = client.get(reverse("admin:workflows_run_change", args=[run.pk])).content.decode()
    assert f"about <strong>order {order.pk}</strong>" in html


@pytest.fixture
def api(superuser) -> APIClient:
    client = APIClient()
    client.force_authenticate(superuser)
    return client


def test_the_api_gives_the_subject_of_each_run(api):
    shipment = Shipment.objects.create(carrier="post")
    run = fulfil(shipment)
    keyless = workflows.start_run(Fulfil, {"order": "none"})
    subject = {"type": "acceptance_flowapp.shipment", "id": str(shipment.pk)}
    assert api.get(f"/api/runs/{run.pk}/").json()["subject"] == subject
    assert api.get(f"/api/runs/{keyless.pk}/").json()["subject"] is None
    listed = {row["id"]: row["subject"] for row in api.get("/api/runs/").json()["results"]}
    assert listed == {str(run.pk): subject, str(keyless.pk): None}


def test_the_api_filters_runs_by_subject(api):
    order, other = Order.objects.create(number="A-1"), Order.objects.create(number="A-2")
    run = fulfil(order)
    fulfil(other)
    fulfil(Shipment.objects.create())

    def ids(query: str) -> list[str]:
        response = api.get(f"/api/runs/?{query}")
        assert response.status_code == 200, response.content
        return [row["id"] for row in response.json()["results"]]

    by_order = ids(f"subject_type=acceptance_flowapp.order&subject_id={order.pk}")
    assert by_order == [str(run.pk)]
    assert len(ids("subject_type=acceptance_flowapp.order")) == 2
    assert ids("subject_type=shop.unknown") == []
    refused = api.get("/api/runs/?subject_type=order")
    assert refused.status_code == 400
    assert "subject_type" in refused.content.decode()
