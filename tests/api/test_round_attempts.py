"""Over HTTP, a step's attempts are numbered within its round, as the run page numbers
them; ``/rounds/`` answers every round with its telemetry, ``frames/?round=N`` an ended
round's frames; a fan-out item carries its own telemetry."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

import workflows
from tests.engine.telemetry.test_rounds import FAILING, WANTED, Looping, Plain
from tests.engine.telemetry.test_unit_telemetry import Shipping
from tests.support.runs import run_inline
from workflows.models import Run, Step
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _reset() -> None:
    FAILING["through"] = 0
    WANTED["rounds"] = 1


def finished(workflow: Any) -> Run:
    return run_inline(workflow, until=timezone.now() + timedelta(days=1))


def test_step_and_run_representations_number_attempts_within_the_round(api):
    WANTED["rounds"] = 2
    FAILING["through"] = 1  # round 1: attempts 1 (failed) and 2; round 2: attempt 3
    run = finished(Looping)
    client = api("viewer")
    detail = client.get(f"/api/runs/{run.pk}/").json()
    work = next(step for step in detail["steps"] if step["name"] == "work")
    assert (work["attempt"], work["max_attempts"], work["round"]) == (1, 3, 2)
    work = client.get(f"/api/steps/{work['id']}/").json()
    assert (work["attempt"], work["max_attempts"], work["round_attempts_before"]) == (1, 3, 2)
    assert work["summary"] == {"at3": True}


def test_rounds_endpoint_keeps_each_rounds_telemetry(api):
    run = finished(Plain)
    workflows.rerun_from(run.pk, "second")
    run_pending()
    client = api("viewer")
    answer = client.get(f"/api/runs/{run.pk}/steps/second/rounds/")
    assert answer.status_code == 200, answer.content
    rounds = answer.json()["results"]
    assert [(r["round"], r["current"], r["attempt"]) for r in rounds] == [
        (1, False, 1),
        (2, True, 1),
    ]
    assert rounds[0]["summary"] == {"at1": True}
    assert rounds[1]["summary"] == {"at2": True}
    now = client.get(f"/api/runs/{run.pk}/steps/second/frames/").json()
    assert [f["text"] for f in now["frames"]] == ["attempt 2"]
    old = client.get(f"/api/runs/{run.pk}/steps/second/frames/?round=1").json()
    assert [f["text"] for f in old["frames"]] == ["attempt 1"]
    missing = client.get(f"/api/runs/{run.pk}/steps/second/frames/?round=9")
    assert missing.status_code == 400
    assert missing.json()["error"]["code"] == "invalid_input"
    assert client.get(f"/api/runs/{run.pk}/steps/nope/rounds/").status_code == 404


def test_items_carry_their_telemetry(api):
    run = finished(Shipping)
    client = api("viewer")
    ship = Step.objects.get(run=run, name="ship")
    answer = client.get(f"/api/steps/{ship.pk}/items/")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    rows = body["results"] if isinstance(body, dict) else body
    first = next(row for row in rows if row["key"] == "a")
    assert first["progress_message"] == "shipped"
    assert first["summary"] == {"item": "a"}
    assert [frame["text"] for frame in first["log"]] == ["packed a", "sent"]
