"""Ids in URLs are read in the one form the API hands out: ASCII digits, or a hyphenated
UUID. Anything Python would also read as that id (``1_0``, ``+10``, full-width digits,
``{uuid}``) names nothing, as gates always required."""

from __future__ import annotations

import pytest

from tests.api.test_api_basics import assert_error

pytestmark = pytest.mark.django_db


def spellings(pk: int) -> list[str]:
    """Texts ``int()`` reads as ``pk`` that are not how the API writes it."""
    digits = str(pk)
    full_width = "".join(chr(ord(digit) - ord("0") + 0xFF10) for digit in digits)
    return [
        f"+{digits}",
        f"%20{digits}%20",
        full_width,
        f"{digits[0]}_{digits[1:]}" if len(digits) > 1 else f"0_{digits}",
        f"{digits}%00",
    ]


def test_a_step_or_its_items_by_an_id_in_another_spelling_is_not_found(api, sample):
    for text in spellings(sample.fan_out.pk):
        assert_error(api("viewer").get(f"/api/steps/{text}/"), 404, "step_not_found")
        assert_error(api("viewer").get(f"/api/steps/{text}/items/"), 404, "step_not_found")
        assert_error(api("operator").post(f"/api/steps/{text}/retry/"), 404, "step_not_found")
    assert api("viewer").get(f"/api/steps/{sample.fan_out.pk}/").status_code == 200


def test_a_gate_or_budget_by_an_id_in_another_spelling_is_not_found(api, sample):
    for text in spellings(sample.gate.pk):
        assert_error(api("viewer").get(f"/api/gates/{text}/"), 404, "gate_not_found")
    for text in spellings(sample.budget.pk):
        assert_error(api("viewer").get(f"/api/budgets/{text}/"), 404, "budget_not_found")


def test_an_id_beyond_the_largest_key_is_not_found(api):
    for resource, code in (("steps", "step"), ("gates", "gate"), ("budgets", "budget")):
        response = api("viewer").get(f"/api/{resource}/{2**63}/")
        assert_error(response, 404, f"{code}_not_found")


def test_a_run_by_an_id_in_another_spelling_is_not_found(api, sample):
    pk = sample.run.pk
    for text in (f"{{{pk}}}", f"urn:uuid:{pk}", pk.hex, f"%20{pk}", f"{pk}%00"):
        assert_error(api("viewer").get(f"/api/runs/{text}/"), 404, "run_not_found")
        assert_error(api("viewer").get(f"/api/runs/{text}/events/"), 404, "run_not_found")
        assert_error(api("operator").post(f"/api/runs/{text}/pause/"), 404, "run_not_found")
    assert api("viewer").get(f"/api/runs/{str(pk).upper()}/").status_code == 200


def test_a_bulk_order_takes_run_ids_in_the_hyphenated_form_only(api, sample):
    pk = sample.run.pk
    for text in (f"{{{pk}}}", f"urn:uuid:{pk}", pk.hex, f" {pk}"):
        response = api("operator").post("/api/runs/bulk/pause/", {"ids": [text]}, format="json")
        error = assert_error(response, 400, "validation_error")
        assert "ids" in error["details"], error
    response = api("operator").post("/api/runs/bulk/pause/", {"ids": [str(pk)]}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["totals"]["matched"] == 1
