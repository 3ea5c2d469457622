"""The console's start page: an unknown workflow is a message on a 404 page, a repeat
with a known idempotency key says it started nothing, and the workflow's example input
is offered."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse
from django.utils.html import escape

from tests.admin.admin_console import notes, staff
from workflows.models import Run, RunTag

pytestmark = pytest.mark.django_db

START = "admin:workflows_run_start"
ORDER = {"order_id": "S-1", "lines": [{"sku": "BOOK-1", "quantity": 1, "price": "5.00"}]}


@pytest.fixture
def starter(client):
    client.force_login(staff("starter"))
    return client


@pytest.mark.parametrize(
    "name", ["no_such_workflow", "\x00", "order fulfilment", "<b>bold</b>", "x" * 300]
)
def test_a_bookmark_to_an_unknown_workflow_is_a_message_on_a_404_page(starter, name):
    page = starter.get(reverse(START), {"workflow": name})
    assert page.status_code == 404
    [message] = notes(page)
    assert message.startswith("No workflow called “")
    assert "is registered" in message
    assert "\x00" not in message
    assert "<" not in message.replace("<a href", "")  # the name is escaped
    # The page still offers the registered workflows to start.
    assert b'<option value="order_fulfilment"' in page.content


def test_a_wrong_case_name_is_refused_with_the_name_it_may_mean(starter):
    page = starter.get(reverse(START), {"workflow": "ORDER_FULFILMENT"})
    assert page.status_code == 404
    assert notes(page) == [
        "No workflow called “ORDER_FULFILMENT” is registered. Did you mean "
        f'<a href="{reverse(START)}?workflow=order_fulfilment">“order_fulfilment”</a>?'
    ]


def test_posting_an_unknown_workflow_starts_nothing_and_says_why(starter):
    response = starter.post(
        reverse(START), {"workflow": "no_such_workflow", "input": json.dumps(ORDER)}
    )
    assert response.status_code == 404
    assert notes(response) == [
        "No workflow called “no_such_workflow” is registered. "
        "Choose one of the registered workflows."
    ]
    assert not Run.objects.exists()


def test_a_repeat_with_a_known_idempotency_key_says_already_started_and_links_the_run(starter):
    posted = {"workflow": "order_fulfilment", "input": json.dumps(ORDER), "idempotency_key": "k1"}
    first = starter.post(reverse(START), posted)
    run = Run.objects.get()
    assert notes(first) == [f"Started run {str(run.pk)[:8]} of order_fulfilment."]
    again = starter.post(reverse(START), posted)
    run_url = reverse("admin:workflows_run_change", args=[run.pk])
    assert again["Location"] == run_url
    message = notes(again)[-1]  # the first start's message was never shown
    assert message.startswith(
        f'Run <a href="{run_url}">{str(run.pk)[:8]}</a> of order_fulfilment was already '
        "started with idempotency key “k1”; nothing new was started"
    )
    assert Run.objects.count() == 1


def test_the_start_page_prefills_the_workflows_example_input(starter):
    from flowsite.demo.flows import OrderFulfilment

    page = starter.get(reverse(START), {"workflow": "order_fulfilment"})
    assert page.status_code == 200
    form = page.context["form"]
    assert json.loads(form["input"].value()) == OrderFulfilment.input_example
    assert b'id="input-example"' in page.content
    # The example is an input the workflow accepts.
    started = starter.post(
        reverse(START),
        {"workflow": "order_fulfilment", "input": json.dumps(OrderFulfilment.input_example)},
    )
    assert started.status_code == 302
    assert Run.objects.get().input == OrderFulfilment.input_example


def test_a_workflow_without_an_example_starts_from_an_empty_object(starter):
    page = starter.get(reverse(START), {"workflow": "console_checkout"})
    assert json.loads(page.context["form"]["input"].value()) == {}
    assert b'id="input-example"' not in page.content


def test_the_start_form_tags_the_run_from_key_value_lines(starter):
    posted = {
        "workflow": "order_fulfilment",
        "input": json.dumps(ORDER),
        "tags": "customer=acme\r\n\r\n  region=eu  \r\nnote=a=b",
    }
    response = starter.post(reverse(START), posted)
    assert response.status_code == 302, notes(response)
    run = Run.objects.get()
    assert run.tags == {"customer": "acme", "note": "a=b", "region": "eu"}
    assert dict(RunTag.objects.filter(run=run).values_list("key", "value")) == run.tags


@pytest.mark.parametrize(
    ("tags", "error"),
    [
        ("Customer=acme", "tag 'Customer=acme': tag key 'Customer' must match"),
        ("customer", "tag 'customer' must be key=value, e.g. customer=acme"),
        ("customer=" + "x" * 256, "the limit is 255"),
        ("customer=a\nCustomer=b", "tag key 'Customer' must match"),
        ("customer=a\ncustomer=b", "tag 'customer' is given twice ('a' and 'b')"),
        ("\n".join(f"k{n}=v" for n in range(33)), "33 tags; a run has at most 32"),
    ],
)
def test_a_bad_tag_in_the_start_form_is_a_form_error_naming_it_and_starts_nothing(
    starter, tags, error
):
    posted = {"workflow": "order_fulfilment", "input": json.dumps(ORDER), "tags": tags}
    page = starter.post(reverse(START), posted)
    assert page.status_code == 200
    [message] = page.context["form"].errors["tags"]
    assert error in message
    assert escape(message) in page.content.decode()  # shown on the form
    assert not Run.objects.exists()
