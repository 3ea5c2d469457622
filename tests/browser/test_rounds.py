"""The run page after a rerun, in a real browser at 1400 px: the reset step shows its
new round's attempts numbered from 1 and its own summary, and its earlier round (with
that round's progress and summary) opens beneath it. A screenshot goes to
``$FLOWSITE_SHOTS_DIR`` (``rounds-rerun.png``) when that is set."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

import workflows
from tests.browser.chromium import shoot
from tests.browser.test_console import operator, sign_in
from tests.engine.telemetry.test_rounds import FAILING, Flaky
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_run_page_after_a_rerun_shows_the_new_round_and_keeps_the_old(new_page):
    operator()
    FAILING["through"] = 3
    run = workflows.start_run(Flaky)
    run_pending(until=timezone.now() + timedelta(days=1))
    workflows.retry_run(run.pk)  # round 2: attempt 4 succeeds
    run_pending(until=timezone.now() + timedelta(days=1))
    workflows.rerun_from(run.pk, "work")  # round 3: attempt 5
    run_pending(until=timezone.now() + timedelta(days=1))
    FAILING["through"] = 0

    page = new_page()
    sign_in(page, f"/admin/workflows/run/{run.pk}/change/")
    row = page.locator("#step-work")
    cells = row.locator("td")
    assert cells.nth(3).inner_text() == "1 of 3"
    row.locator("details.step-summary summary").click()
    assert '"at5": true' in row.locator("details.step-summary pre").inner_text()
    rounds = row.locator("details.wf-rounds")
    assert "Earlier rounds (2)" in rounds.locator("summary").inner_text()
    rounds.locator("summary").click()
    first = rounds.locator("li.wf-step-round").first
    assert first.is_visible()
    text = first.inner_text()
    assert "Round 1" in text and "failed" in text and "attempts 3 of 3" in text
    assert "progress: 1 of 2 — half" in text
    assert '"at3": true' in text and "log frames 1\u20133" in text
    second = rounds.locator("li.wf-step-round").nth(1).inner_text()
    assert "Round 2" in second and "completed" in second and "attempts 1 of 3" in second
    shoot(page, "rounds-rerun")
