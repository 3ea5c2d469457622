"""An operator opens the Schedules list and a schedule's page in a real browser, and
pauses a schedule through its confirmation page."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from tests.admin.schedule_samples import make_samples
from tests.browser.chromium import shoot
from tests.support.browser import PASSWORD, sign_in
from workflows.models import Schedule

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_list_and_a_schedule_page_in_chromium(new_page):
    samples = make_samples()
    User.objects.create_superuser("operator", password=PASSWORD)
    page = new_page()
    sign_in(page, "operator", "/admin/")
    page.locator("#workflows-console-module").get_by_role("link", name="Schedules").click()
    page.wait_for_load_state()
    listing = page.locator("#result_list").inner_text()
    assert "At 02:00 every day" in listing and "every 5 minutes" in listing
    assert "Supplier API down for maintenance until Monday" in listing
    shoot(page, "schedules-list")

    page.get_by_role("link", name="hourly-approval").click()
    page.wait_for_load_state()
    assert "schedule.skipped" in page.locator("#events").inner_text()
    assert page.locator("#schedule-runs .wf-badge").count() == 1
    shoot(page, "schedule-page")

    page.get_by_role("link", name="Pause schedule").click()
    page.get_by_label("Note").fill("quarter-end freeze")
    page.get_by_role("button", name="Pause schedule").click()
    page.wait_for_load_state()
    assert "is paused" in page.locator(".messagelist .success").inner_text()
    assert "quarter-end freeze" in page.locator("#schedule-state").inner_text()
    assert Schedule.objects.get(pk=samples.held.pk).paused
