"""The console's tags: the runs list's tag key and tag filters (the keys and values in
use offered, the runs carrying the tag listed), chips in the list's rows and on the run
page, each a link to the runs carrying it; a malformed tag in the address is Django's
"incorrect lookup" redirect; offering the tags costs the same queries whatever the
number of tagged runs."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

import workflows
from tests.admin.admin_console import staff
from tests.support.handlers import WORK
from workflows import Task, Workflow
from workflows.models import Run

pytestmark = pytest.mark.django_db

LIST = "admin:workflows_run_changelist"


class Order(Workflow):
    name = "admin_tags_order"
    work = Task(WORK)


@pytest.fixture
def viewer(client: Any) -> Any:
    client.force_login(staff("viewer"))
    return client


def listed(client: Any, query: str = "") -> tuple[str, list[Run]]:
    response = client.get(reverse(LIST) + query)
    assert response.status_code == 200, response
    return response.content.decode(), list(response.context["cl"].result_list)


def tagged(customer: str, region: str, **options: Any) -> Run:
    return workflows.start_run(Order, {}, tags={"customer": customer, "region": region}, **options)


def test_the_tag_filter_lists_the_runs_carrying_the_tag(viewer: Any):
    acme = tagged("acme", "eu")
    tagged("globex", "eu")
    workflows.start_run(Order, {})
    _, runs = listed(viewer, "?tag=customer:acme")
    assert [run.pk for run in runs] == [acme.pk]


def test_the_key_filter_offers_the_keys_then_the_values_of_the_chosen_key(viewer: Any):
    tagged("acme", "eu")
    tagged("globex", "us")
    workflows.start_run(Order, {})
    html, runs = listed(viewer)
    assert "By tag key" in html
    assert "?tag_key=customer" in html and "?tag_key=region" in html
    assert "By tag: customer" not in html  # no values before a key is chosen
    html, runs = listed(viewer, "?tag_key=customer")
    assert len(runs) == 2  # the runs carrying the key
    assert "By tag: customer" in html
    assert "tag=customer%3Aacme" in html and "tag=customer%3Aglobex" in html
    assert "tag=region%3Aeu&amp;tag_key=customer" not in html  # only the chosen key's


def test_choosing_a_value_keeps_its_key_and_its_values_offered(viewer: Any):
    acme = tagged("acme", "eu")
    tagged("globex", "us")
    html, runs = listed(viewer, "?tag_key=customer&tag=customer:acme")
    assert [run.pk for run in runs] == [acme.pk]
    assert "tag=customer%3Aglobex" in html


def test_a_tag_past_the_offered_values_is_still_offered_when_chosen(viewer: Any, monkeypatch):
    monkeypatch.setattr("workflows.admin.tags.tag_values", lambda key: [])
    acme = tagged("acme", "eu")
    html, runs = listed(viewer, "?tag=customer:acme")
    assert [run.pk for run in runs] == [acme.pk]
    assert "tag=customer%3Aacme" in html


@pytest.mark.parametrize(
    "query", ["?tag=customer", "?tag=Customer:acme", "?tag_key=Bad%20Key", "?tag=customer:%00"]
)
def test_a_malformed_tag_in_the_address_is_the_incorrect_lookup_redirect(viewer: Any, query):
    tagged("acme", "eu")
    response = viewer.get(reverse(LIST) + query)
    assert response.status_code == 302
    assert response["Location"].endswith("?e=1")


def test_the_rows_show_tags_as_chips_linking_to_their_filter(viewer: Any):
    tagged("acme", "eu")
    html, _ = listed(viewer)
    assert '<span class="wf-tag-key">customer</span> acme</a>' in html
    assert "?tag=customer%3Aacme&amp;tag_key=customer" in html


def test_a_row_shows_three_chips_and_counts_the_rest(viewer: Any):
    workflows.start_run(Order, {}, tags={f"k{n}": "v" for n in range(6)})
    html, _ = listed(viewer)
    assert html.count('class="wf-tag-key"') == 3
    assert '<span class="wf-tag wf-tag-more">+3</span>' in html


def test_the_run_page_shows_every_tag(viewer: Any):
    run = workflows.start_run(Order, {}, tags={f"k{n}": f"v{n}" for n in range(6)})
    response = viewer.get(reverse("admin:workflows_run_change", args=[run.pk]))
    html = response.content.decode()
    assert 'id="run-tags"' in html
    assert html.count('class="wf-tag-key"') == 6
    assert '<span class="wf-tag-key">k5</span> v5</a>' in html


def test_a_run_without_tags_shows_no_tags_line(viewer: Any):
    run = workflows.start_run(Order, {})
    response = viewer.get(reverse("admin:workflows_run_change", args=[run.pk]))
    assert 'id="run-tags"' not in response.content.decode()


def test_offering_tags_costs_the_same_queries_whatever_the_number_of_tagged_runs(viewer: Any):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            listed(viewer, "?tag_key=customer&tag=customer:c1")
        return len(captured)

    for n in range(3):
        tagged(f"c{n}", "eu")
    few = queries()
    for n in range(3, 30):
        tagged(f"c{n}", "eu")
    assert queries() == few
