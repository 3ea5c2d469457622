"""An operator creates a budget on the Budgets page in a real browser, sees it counted
and breached, and changes it through the same form."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

import workflows
from tests.browser.chromium import shoot
from tests.support.browser import PASSWORD, sign_in
from tests.support.handlers import NOOP
from workflows import Task, Workflow
from workflows.models import BudgetCounter, RuntimeBudget

pytestmark = pytest.mark.django_db(transaction=True)


class Summarise(Workflow):
    name = "browser_budget_summarise"
    summarise = Task(NOOP)


def test_creating_and_editing_a_budget_in_chromium(new_page):
    User.objects.create_superuser("operator", password=PASSWORD)
    page = new_page()
    sign_in(page, "operator", "/admin/workflows/budgetcounter/")
    page.get_by_role("link", name="Create a budget").click()
    page.wait_for_load_state()
    page.get_by_label("Workflow").select_option(Summarise.name)
    page.get_by_label("Dimension").fill("tokens")
    page.get_by_label("Limit").fill("50000")
    page.get_by_label("Counted for").select_option("business_key")
    page.get_by_role("textbox", name="Period").fill("1 00:00:00")
    page.get_by_label("fail its steps with budget_exhausted").check()
    shoot(page, "budget-create")
    page.get_by_role("button", name="Create budget").click()
    page.wait_for_load_state()
    assert "created" in page.locator(".messagelist .success").inner_text()
    assert Summarise.name in page.locator("#runtime_budgets").inner_text()
    rule = RuntimeBudget.objects.get()
    assert (rule.per, rule.on_exhausted, rule.changed_by) == ("business_key", "fail", "operator")

    workflows.report_usage(Summarise, "tokens", 51_300, scope_key="acme")
    page.reload()
    row = page.locator("#result_list tbody tr").first.inner_text()
    assert "acme" in row and "set at run time" in row and "reached once, last" in row
    shoot(page, "budgets-breached")

    page.get_by_role("link", name="Edit").first.click()
    page.wait_for_load_state()
    assert page.get_by_label("Limit").input_value() == "50000"
    page.get_by_label("Limit").fill("60000")
    page.get_by_role("button", name="Change budget").click()
    page.wait_for_load_state()
    assert "changed" in page.locator(".messagelist .success").inner_text()
    assert BudgetCounter.objects.get(scope_key="acme").limit == 60000
