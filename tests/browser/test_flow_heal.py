"""A member a failed dependency cancelled, in a real browser at 1400 px: its run page
lists retry and rerun under "Not possible now" with the reason, naming the failed
upstream member (issue #35, point 1). The screenshot is kept with the test's files."""

from __future__ import annotations

import pytest

import workflows
from tests.browser.chromium import shoot
from tests.browser.test_console import operator, sign_in
from tests.support.flows import finish
from tests.support.workflows import Echo
from workflows.models import Run
from workflows.status import RunStatus

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_run_page_shows_why_a_member_cannot_be_retried(new_page):
    operator()
    flow = workflows.create_flow("nightly")
    alpha = workflows.add_to_flow(flow, Echo, {}, member="alpha")
    beta = workflows.add_to_flow(flow, Echo, {}, member="beta", after=["alpha"])
    workflows.seal_flow(flow)
    finish(alpha, fail=True)
    assert Run.objects.get(pk=beta.pk).status == RunStatus.CANCELLED

    page = new_page()
    sign_in(page, f"/admin/workflows/run/{beta.pk}/change/")
    refused = page.locator("details", has=page.get_by_text("Not possible now"))
    # The member ended: of the verbs only Dismiss is offered, so the refused ones are
    # folded away until opened.
    offered = page.locator(".actions a.button")
    assert [text.strip() for text in offered.all_inner_texts()] == ["Dismiss"]
    assert not refused.evaluate("details => details.open")
    refused.locator("summary").click()
    items = refused.locator("ul.refused li")
    retry = items.filter(has_text="retry").first
    assert retry.is_visible()
    text = retry.inner_text()
    assert "'alpha' (failed)" in text
    assert "retry the failed upstream member" in text
    assert not page.locator('.actions a.button:has-text("Retry")').count()

    shoot(page, "heal-run-page")
