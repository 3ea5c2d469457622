"""Cursor pages: only cursors the server issued are followed, and ``page_size`` is
checked rather than silently replaced, on every paginated list."""

from __future__ import annotations

import base64
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.api.test_api_basics import assert_error

pytestmark = pytest.mark.django_db


def cursor_of(link: str) -> str:
    return parse_qs(urlsplit(link).query)["cursor"][0]


def crafted(text: str) -> str:
    """A cursor as DRF encodes one (base64 of its fields), but made up."""
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize(
    "cursor",
    [
        crafted("p=abc"),
        crafted("p=2025-01-01"),
        crafted("o=5&r=1&p=1"),
        crafted("p=99999999999999999999999"),
        "not base64!",
        "",
    ],
)
def test_a_cursor_the_server_did_not_issue_is_not_found_on_every_list(api, sample, cursor):
    for listing in sample.paginated_lists():
        error = assert_error(api("viewer").get(listing, {"cursor": cursor}), 404, "not_found")
        assert "cursor" in error["message"]


def test_an_issued_cursor_with_its_end_changed_is_not_found(api, sample):
    for listing in sample.paginated_lists():
        first = api("viewer").get(listing, {"page_size": 1})
        assert first.status_code == 200, (listing, first.content)
        issued = cursor_of(first.json()["next"])
        assert api("viewer").get(listing, {"cursor": issued}).status_code == 200
        for tampered in (issued[:-1], issued[:-1] + ("A" if issued[-1] != "A" else "B")):
            assert_error(api("viewer").get(listing, {"cursor": tampered}), 404, "not_found")


def test_a_cursor_is_followed_only_by_a_list_of_the_same_order(api, sample):
    """A runs cursor holds a time; the budgets list is ordered by id."""
    runs = api("viewer").get("/api/runs/", {"page_size": 1}).json()
    assert_error(
        api("viewer").get("/api/budgets/", {"cursor": cursor_of(runs["next"])}), 404, "not_found"
    )


def test_issued_next_and_previous_links_are_followed_on_every_list(api, sample):
    for listing in sample.paginated_lists():
        first = api("viewer").get(listing, {"page_size": 1}).json()
        second = api("viewer").get(first["next"])
        assert second.status_code == 200 and second.json()["results"] != first["results"]
        assert api("viewer").get(second.json()["previous"]).status_code == 200


@pytest.mark.parametrize("size", ["abc", "-1", "0", "100000", "1.5", "+1", " 1", "1_0", "\uff11"])
def test_a_page_size_out_of_range_or_not_a_number_is_a_400_naming_it(api, sample, size):
    for listing in sample.paginated_lists():
        error = assert_error(
            api("viewer").get(listing, {"page_size": size}), 400, "validation_error"
        )
        assert list(error["details"]) == ["page_size"], listing
        assert "whole number from 1 to" in error["details"]["page_size"][0]


def test_the_largest_page_size_is_taken(api, sample):
    assert api("viewer").get("/api/runs/", {"page_size": 500}).status_code == 200
    assert api("viewer").get("/api/budgets/", {"page_size": 1000}).status_code == 200


def test_the_schema_gives_the_range_of_page_size(api):
    schema = api("viewer").get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    parameters = schema.json()["paths"]["/api/runs/"]["get"]["parameters"]
    page_size = next(item for item in parameters if item["name"] == "page_size")
    assert page_size["schema"] == {"type": "integer", "minimum": 1, "maximum": 500}
