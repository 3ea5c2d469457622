"""A cancelled flow's page in a real browser at 1400 px: it says who cancelled the flow,
with which policy and reason, and which members the cancellation cancelled (issue #35
point 2: the policy, reason and actor are stored on the flow)."""

from __future__ import annotations

import pytest

import workflows
from tests.browser.chromium import shoot
from tests.browser.test_console import operator, sign_in
from tests.support.workflows import Unit

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_cancelled_flows_page_shows_policy_reason_and_actor(new_page):
    user = operator()
    flow = workflows.create_flow("nightly release")
    workflows.add_to_flow(flow, Unit, {}, member="build")
    workflows.add_to_flow(flow, Unit, {}, member="test", after=("build",))
    workflows.add_to_flow(flow, Unit, {}, member="publish", after=("test",))
    record = workflows.cancel_flow(flow, "cancel_pending", reason="release pulled", user=user)
    assert record.cancelled == 2

    page = new_page()
    sign_in(page, f"/admin/workflows/flow/{flow.pk}/change/")
    said = page.locator("#flow-cancellation").inner_text()
    assert said == (
        "Cancelled by operator with policy cancel_pending, reason “release pulled”: "
        "2 members cancelled (test, publish)."
    )
    shoot(page, "flowedit-cancelled-flow")
