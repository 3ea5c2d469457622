"""The console's "Recover stuck units" page in a real browser: the filter is checked by a
dry run that lists the units, and the confirm button applies it."""

from __future__ import annotations

import pytest

from tests.browser.chromium import shoot
from tests.browser.test_console import operator, sign_in
from tests.support.revoke import Parcels, running_item, running_load
from workflows.engine import ITEM, claim
from workflows.models import FanOutItem, Step

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_operator_checks_then_fails_stuck_items(new_page):
    runs = [running_item("p1", f"gpu-worker-{n}.prod:4821{n}")[0] for n in range(3)]
    late = FanOutItem.objects.get(step__run=runs[0], key="p2")
    claim(ITEM, late.pk, "gpu-worker-9.prod:48299")
    running_load("w-1")  # a step: not an item, never selected
    operator()
    page = new_page()
    sign_in(page, "/admin/workflows/run/units/bulk/")
    assert page.viewport_size["width"] == 1400

    page.get_by_label("Verb").select_option("fail_step")
    page.get_by_label("Units").select_option("item")
    page.get_by_label("running").check()
    page.get_by_label("Workflow").fill(Parcels.name)
    page.get_by_label("Reason").fill("GPU pool drained; the parcels are shipped by hand")
    page.get_by_role("button", name="Check").click()
    page.wait_for_load_state()
    assert page.locator("#dry-run").inner_text().split() == [
        "4",
        "matched",
        "4",
        "eligible",
        "0",
        "skipped",
    ]
    assert page.locator("#unit-sample tbody tr").count() == 4
    shoot(page, "bulk-units")

    page.get_by_role("button", name="fail_step 4 items").click()
    page.wait_for_load_state()
    done = page.locator(".messagelist .success").inner_text()
    # The first item failing fails its fan-out and its run, which unwinds: its other
    # running item is skipped with the rule (revoke or terminate stop a stopping run's work).
    assert "Bulk fail_step of items: 4 matched, 3 done, 1 skipped, 0 failed." in done
    assert "items are failed only while their run may still run them" in (
        page.locator(".messagelist").inner_text()
    )
    still = FanOutItem.objects.filter(status="running")
    assert list(still.values_list("pk", flat=True)) == [late.pk]  # left to its worker
    assert Step.objects.get(name="load").status == "running"
