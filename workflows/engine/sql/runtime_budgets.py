"""Whether a workflow has budgets set at run time: a column the claim and run-lock reads
carry, so admission asks the budgets only of the workflows that have some."""

from __future__ import annotations

from workflows.engine.sql.identifiers import column, table
from workflows.models import Run, RuntimeBudget


def runtime_budgets(run: str) -> str:
    """``EXISTS (…)``: whether a budget was set at run time on the workflow of the run
    row named ``run`` (an alias or the table), served by the unique index that starts
    with the workflow's name."""
    return (
        f"EXISTS (SELECT 1 FROM {table(RuntimeBudget)} b "
        f"WHERE b.{column(RuntimeBudget, 'workflow_name')} = {run}.{column(Run, 'workflow_name')})"
    )
