"""An operator finds runs by tag in a real browser: picks a tag key, then one of its
values in use, sees only the runs carrying the tag, each with its tags as chips; opens
one and follows a chip of its page back to the runs carrying that tag."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

import workflows
from tests.browser.chromium import shoot
from tests.support.browser import PASSWORD, sign_in
from tests.support.handlers import NOOP
from workflows import Task, Workflow
from workflows.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


class Invoice(Workflow):
    name = "browser_tags_invoice"
    issue = Task(NOOP)


def row_ids(page) -> list[str]:  # type: ignore[no-untyped-def]
    return [
        link.inner_text() for link in page.locator("#result_list tbody th.field-short_id a").all()
    ]


def test_finding_runs_by_tag_in_chromium(new_page):
    User.objects.create_superuser("operator", password=PASSWORD)
    acme = [
        workflows.start_run(Invoice, {}, tags={"customer": "acme", "region": region})
        for region in ("eu", "us")
    ]
    workflows.start_run(Invoice, {}, tags={"customer": "globex", "region": "eu"})
    workflows.start_run(Invoice, {})
    page = new_page()
    sign_in(page, "operator", "/admin/workflows/run/")
    assert len(row_ids(page)) == 4
    filters = page.locator("#changelist-filter")
    assert "By tag: customer" not in filters.inner_text()

    filters.get_by_role("link", name="customer", exact=True).click()
    page.wait_for_load_state()
    assert len(row_ids(page)) == 3  # the runs carrying the key
    assert "By tag: customer" in filters.inner_text()
    filters.get_by_role("link", name="acme", exact=True).click()
    page.wait_for_load_state()
    shoot(page, "runs-list-tag-filter")
    assert sorted(row_ids(page)) == sorted(str(run.pk)[:8] for run in acme)
    first_row = page.locator("#result_list tbody tr").first
    assert "customer acme" in first_row.locator(".wf-tags").inner_text()
    # The chips wrap inline: a row's two chips share one line, not one a line.
    tops = {round(chip.bounding_box()["y"]) for chip in first_row.locator(".wf-tag").all()}
    assert len(tops) == 1, tops

    opened = first_row.locator("th.field-short_id a").inner_text()
    first_row.locator("th.field-short_id a").click()
    page.wait_for_load_state()
    tags = page.locator("#run-tags")
    assert "customer acme" in tags.inner_text()
    shoot(page, "run-page-tags")

    region = next(run for run in acme if str(run.pk).startswith(opened)).tags["region"]
    tags.get_by_role("link", name=f"region {region}").click()
    page.wait_for_load_state()
    carrying = [run for run in Run.objects.all() if run.tags.get("region") == region]
    assert sorted(row_ids(page)) == sorted(str(run.pk)[:8] for run in carrying)
