"""Long polls of the API: GET /api/runs/{id}/?wait=S answers when the run ends or at S;
GET /api/runs/{id}/steps/{step}/frames/?after=C&wait=S when the step's next frames commit.

The waits are bounded far beyond what a passing test needs and the backstop read is
pushed past them, so an answer showing the ended run proves the request was woken by
the commit; no assertion is about time.
"""

from __future__ import annotations

import pytest
from django.db import connection, connections, transaction

import workflows
from tests.support import live_rows
from tests.support.threads import once_watched, run_concurrently
from workflows import Gate, Workflow
from workflows.engine.sql.connection import engine_alias
from workflows.engine.wakeups import Watch, wake
from workflows.queries import long_poll
from workflows.status import RUN_FINAL


class Held(Workflow):
    name = "long_poll_held"
    review = Gate(prompt="go?")


@pytest.mark.django_db(transaction=True)
def test_a_long_poll_returns_when_another_thread_ends_the_run(api, no_backstop):
    client = api("viewer")
    run = workflows.start_run(Held)
    response, cancelled = run_concurrently(
        lambda: client.get(f"/api/runs/{run.pk}/?wait=60"),
        lambda: once_watched(f"run:{run.pk}", lambda: workflows.cancel_run(run.pk)),
    )
    assert not isinstance(cancelled, Exception), cancelled
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "cancelled"


@pytest.mark.django_db(transaction=True)
def test_a_long_poll_answers_at_its_bound_with_the_current_state(api):
    run = workflows.start_run(Held)
    response = api("viewer").get(f"/api/runs/{run.pk}/?wait=1")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == workflows.get_run(run.pk).status
    assert body["status"] not in RUN_FINAL
    assert [step["status"] for step in body["steps"]] == ["waiting"]


@pytest.mark.django_db(transaction=True)
def test_an_ended_run_is_answered_at_once(api, no_backstop):
    run = workflows.cancel_run(workflows.start_run(Held).pk)
    response = api("viewer").get(f"/api/runs/{run.pk}/?wait=60")
    assert response.json()["status"] == "cancelled"


@pytest.mark.django_db(transaction=True)
def test_the_request_holds_no_transaction_while_it_waits(api, monkeypatch):
    """Even under ATOMIC_REQUESTS: the wait runs in autocommit, outside atomic()."""
    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", True)
    seen: list[tuple[bool, bool]] = []

    class Observed(Watch):
        def wait(self, timeout: float) -> bool:
            waiting_on = connections[engine_alias()]
            seen.append((waiting_on.in_atomic_block, waiting_on.get_autocommit()))
            return super().wait(timeout)

    monkeypatch.setattr(long_poll, "Watch", Observed)
    run = workflows.start_run(Held)
    [response] = run_concurrently(lambda: api("viewer").get(f"/api/runs/{run.pk}/?wait=0.3"))
    assert response.status_code == 200
    assert seen and set(seen) == {(False, True)}


@pytest.mark.django_db
@pytest.mark.parametrize("wait", ["-1", "60.5", "61", "abc", "", "nan", "inf", "1e3", "%00"])
def test_a_bad_wait_is_a_400_naming_it(api, wait):
    run = workflows.start_run(Held)
    response = api("viewer").get(f"/api/runs/{run.pk}/?wait={wait}")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert "wait" in error["details"]


@pytest.mark.django_db
def test_an_unknown_run_is_a_404_without_waiting(api):
    response = api("viewer").get("/api/runs/00000000-0000-0000-0000-000000000000/?wait=60")
    assert response.status_code == 404


def frames_committed(step, *texts: str) -> None:
    """Frames of the step committed with their wake-up, as the engine's flush does."""
    with transaction.atomic():
        live_rows.log(step, *texts)
        wake(f"frames:{step.pk}")


@pytest.mark.django_db(transaction=True)
def test_a_frames_long_poll_returns_when_the_next_frames_commit(api, no_backstop):
    step = live_rows.running_step()
    live_rows.log(step, "first")
    path = f"/api/runs/{step.run_id}/steps/export/frames/?after=1&wait=60"
    response, _ = run_concurrently(
        lambda: api("viewer").get(path),
        lambda: once_watched(f"frames:{step.pk}", lambda: frames_committed(step, "second")),
    )
    assert response.status_code == 200, response.content
    assert [frame["text"] for frame in response.json()["frames"]] == ["second"]


@pytest.mark.django_db(transaction=True)
def test_a_frames_long_poll_answers_at_its_bound_with_none(api):
    step = live_rows.running_step()
    live_rows.log(step, "first")
    response = api("viewer").get(f"/api/runs/{step.run_id}/steps/export/frames/?after=1&wait=1")
    assert response.status_code == 200
    assert response.json()["frames"] == []
    assert response.json()["next_after"] == 1


@pytest.mark.django_db
@pytest.mark.parametrize("wait", ["-1", "61", "abc"])
def test_a_bad_frames_wait_is_a_400_naming_it(api, wait):
    step = live_rows.running_step()
    response = api("viewer").get(f"/api/runs/{step.run_id}/steps/export/frames/?wait={wait}")
    assert response.status_code == 400
    assert "wait" in response.json()["error"]["details"]
