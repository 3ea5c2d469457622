"""The run page's Variables section: each variable, its value and the step (and attempt)
that last wrote it, read from the history; a run without variables pays no query for
them, and one with many writes pays one."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

import workflows
from tests.admin.admin_console import staff
from tests.support.handlers import WORK
from tests.support.runs import claimed
from workflows import Gate, Task, Workflow
from workflows.engine import complete_work
from workflows.models import Run

pytestmark = pytest.mark.django_db


class Quote(Workflow):
    name = "admin_variables_quote"
    price = Task(WORK)
    credit = Task(WORK)
    approve = Gate(prompt="Send it?")


@pytest.fixture
def viewer(client: Any) -> Any:
    client.force_login(staff("viewer"))
    return client


def page_of(client: Any, run: Run) -> str:
    response = client.get(reverse("admin:workflows_run_change", args=[run.pk]))
    assert response.status_code == 200
    return response.content.decode()


def written(run: Run, step: str, *patches: dict[str, Any]) -> None:
    """The step's attempt writes ``patches`` and completes, as a worker would."""
    lease = claimed(run, step, "worker-1")
    lease.variable_patches.extend(patches)
    complete_work(lease, "done")


def quoted(writes: int = 1) -> Run:
    run = workflows.start_run(Quote, variables={"region": "eu", "tier": "gold"})
    written(run, "price", *({"net": net} for net in range(1, writes + 1)))
    written(run, "credit", {"tier": "platinum", "limit": 5000})
    return run


def test_the_page_shows_each_variable_its_value_and_who_last_wrote_it(viewer: Any):
    html = page_of(viewer, quoted())
    assert 'id="run-variables-title">Variables</h2>' in html
    rows = html.split('<table id="variables">')[1].split("</table>")[0]
    expected = [
        ("region", "&quot;eu&quot;", "the run's start"),
        ("tier", "&quot;platinum&quot;", "step <code>credit</code>, attempt 1"),
        ("net", "1", "step <code>price</code>, attempt 1"),
        ("limit", "5000", "step <code>credit</code>, attempt 1"),
    ]
    for name, value, writer in expected:
        row = rows.split(f"<code>{name}</code>")[1].split("</tr>")[0]
        assert f"<pre>{value}</pre>" in row, row
        assert writer in row, row
    assert "run.variables_set" in html


def test_a_run_without_variables_says_so(viewer: Any):
    run = workflows.start_run(Quote)
    assert "No variables." in page_of(viewer, run)


def test_the_writers_cost_one_query_however_many_writes(viewer: Any):
    few, many = quoted(writes=1), quoted(writes=40)
    page_of(viewer, few)  # warm caches (content types, permissions)
    counts = []
    for run in (few, many):
        with CaptureQueriesContext(connection) as queries:
            page_of(viewer, run)
        counts.append(len(queries))
    assert counts[0] == counts[1], counts
