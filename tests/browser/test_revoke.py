"""The console's "Revoke lease" in a real browser: the confirmation page carries the
attempt it showed, and a second confirmation of the same page revokes nothing."""

from __future__ import annotations

import pytest

import workflows
from tests.browser.chromium import shoot
from tests.browser.test_console import operator, sign_in
from tests.support.handlers import WORK
from workflows import Retry, Task, Workflow
from workflows.engine import claim_step
from workflows.models import Event, Step

pytestmark = pytest.mark.django_db(transaction=True)


class WedgedUpload(Workflow):
    name = "browser_revoke_wedged"
    upload = Task(WORK, retry=Retry(max_attempts=2))


def test_a_second_confirmation_of_the_same_page_revokes_nothing(new_page):
    run = workflows.start_run(WedgedUpload)
    step = Step.objects.get(run=run, name="upload")
    claim_step(step.pk, "worker-5.prod:48213:140121")
    operator()
    page = new_page()
    sign_in(page, f"/admin/workflows/run/{run.pk}/change/")
    assert page.viewport_size["width"] == 1400

    page.get_by_role("link", name="Revoke lease “upload”").click()
    page.wait_for_load_state()
    # The same confirmation in a second tab: a double click, or a colleague at once.
    second = page.context.new_page()
    second.goto(page.url)
    for shown in (page, second):
        hidden = shown.locator('input[type="hidden"][name="attempts"]')
        assert hidden.get_attribute("value") == f"step:{step.pk}=1@1"  # attempt 1 of round 1
        assert "attempt 1 of 2, held by worker worker-5.prod:48213:140121" in shown.content()
    page.get_by_label("Reason").fill("worker-5 wedged on a hung SFTP connection")
    shoot(page, "revoke-confirm")

    page.get_by_role("button", name="Revoke lease").click()
    page.wait_for_load_state()
    done = page.locator(".messagelist .success").inner_text()
    assert "revoked attempt 1 of step “upload”, held by worker worker-5.prod:48213:140121" in done
    shoot(page, "revoke-done")

    second.get_by_role("button", name="Revoke lease").click()
    second.wait_for_load_state()
    refused = second.locator(".messagelist .error").inner_text()
    assert "Revoke lease refused: attempt 1 of step “upload”" in refused
    assert "Nothing changed." in refused
    shoot(second, "revoke-second-click")
    assert Event.objects.filter(run=run, type="lease.revoked").count() == 1
    assert Step.objects.get(pk=step.pk).max_attempts == 3
