"""Small workflows that give every list and detail of the API something to show.

:func:`populate` leaves two waiting gates (any signed-in user may decide them), a
fan-out step with items, several events per run, two budget counters and a flow, so
that each paginated list has a second page and each id in a URL can name a real object.
"""

from __future__ import annotations

from dataclasses import dataclass

import workflows
from tests.support.handlers import NOOP
from workflows import FanOut, Gate, Task, Workflow
from workflows.definitions import Budget
from workflows.engine.limits.budgets import record_usage
from workflows.models import BudgetCounter, Flow, Run, Step
from workflows.testing import run_pending

HERE = "tests.api.sample"


def double(ctx) -> int:
    return ctx.item * 2


class Gated(Workflow):
    name = "api_sample_gated"
    approve = Gate(prompt="ship it?", options=[workflows.Option("yes", "Yes")])
    after = Task(NOOP, after=["approve"])


class Fanned(Workflow):
    name = "api_sample_fanned"
    doubles = FanOut(f"{HERE}.double", items=lambda ctx: [1, 2, 3])


class Budgeted(Workflow):
    name = "api_sample_budgeted"
    budgets = [Budget("tokens", 100), Budget("tokens", 10, per="business_key")]
    call = Task(NOOP)


@dataclass(frozen=True)
class Sample:
    run: Run
    gate: Step
    fan_out: Step
    budget: BudgetCounter
    flow: Flow

    def paginated_lists(self) -> list[str]:
        """Every paginated list of the API, each with more than one row."""
        return [
            "/api/runs/",
            f"/api/steps/{self.fan_out.pk}/items/",
            "/api/gates/",
            "/api/budgets/",
        ]


def populate() -> Sample:
    gated = [workflows.start_run(Gated, business_key=key) for key in ("G-1", "G-2")]
    fanned = workflows.start_run(Fanned)
    budgeted = workflows.start_run(Budgeted, business_key="acme")
    record_usage(budgeted.pk, None, 1, Budgeted, "tokens", 5)
    flow = workflows.create_flow("api sample")
    workflows.add_to_flow(flow, Budgeted, {}, member="call")
    run_pending()
    return Sample(
        run=gated[0],
        gate=gated[0].steps.get(name="approve"),
        fan_out=fanned.steps.get(name="doubles"),
        budget=BudgetCounter.objects.filter(workflow_name=Budgeted.name).first(),
        flow=flow,
    )
