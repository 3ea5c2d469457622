"""The console's Retry and Rerun forms show the run's deadline and keep it unless the
operator changes or empties it (a replay without one clears it); a value that is no
deadline is an error on the field, not an error page."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

import workflows
from tests.admin.admin_console import Fragile, notes, staff
from tests.support.handlers import BOOM, NOOP
from workflows import PermanentError, Retry, Task, Workflow
from workflows.admin.deadline_field import shown_deadline
from workflows.models import Run
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db


def stuck_undo(ctx) -> None:
    raise PermanentError("the stock system is down")


class Unwinding(Workflow):
    """Holds stock, fails to charge, and cannot give the stock back."""

    name = "replay_deadline_unwinding"
    hold = Task(NOOP, compensate=f"{__name__}.stuck_undo", retry=Retry(max_attempts=1))
    charge = Task(BOOM)


@pytest.fixture
def operator(client):
    client.force_login(staff("operator"))
    return client


def failed(deadline: timedelta | datetime | None = timedelta(hours=2)) -> Run:
    """A fragile run that failed (its card is declined) before its deadline."""
    run = workflows.start_run(Fragile, {"order": "F", "card": "declined"}, deadline=deadline)
    run_pending()
    run = Run.objects.get(pk=run.pk)
    assert run.status == "failed"
    return run


def act(run: Run, verb: str) -> str:
    return reverse("admin:workflows_run_act", args=[run.pk, verb])


def deadline_of(run: Run) -> datetime | None:
    return Run.objects.values_list("deadline", flat=True).get(pk=run.pk)


def test_the_retry_form_shows_the_runs_deadline(operator):
    run = failed()
    assert run.deadline is not None
    html = operator.get(act(run, "retry")).content.decode()
    assert f'value="{shown_deadline(run.deadline)}"' in html
    assert "The run&#x27;s deadline, kept as shown" in html


def test_retry_keeps_the_deadline_as_shown(operator):
    run = failed()
    response = operator.post(act(run, "retry"), {"deadline": shown_deadline(run.deadline)})
    assert response.status_code == 302
    assert deadline_of(run) == run.deadline  # to the microsecond
    assert notes(response) == [
        f"Run {str(run.pk)[:8]} is now running; its deadline stays {shown_deadline(run.deadline)}."
    ]


def test_retry_sets_a_new_deadline(operator):
    run = failed()
    later = timezone.now() + timedelta(days=3)
    operator.post(act(run, "retry"), {"deadline": shown_deadline(later)})
    assert deadline_of(run) == later.replace(microsecond=0)
    operator.post(act(failed(), "retry"), {"deadline": "PT30M"})


def test_retry_with_the_field_emptied_clears_the_deadline(operator):
    run = failed()
    response = operator.post(act(run, "retry"), {"deadline": ""})
    assert deadline_of(run) is None
    assert notes(response)[-1].endswith("is now running; it has no deadline now.")


@pytest.mark.parametrize(
    ("typed", "error"),
    [
        ("next tuesday", "a deadline is seconds, an ISO 8601 duration"),
        ("-60", "deadline must be a positive duration"),
    ],
)
def test_a_bad_deadline_is_an_error_on_its_field(operator, typed, error):
    run = failed()
    response = operator.post(act(run, "retry"), {"deadline": typed})
    assert response.status_code == 200
    field_errors = response.context["form"].errors
    assert list(field_errors) == ["deadline"]
    assert error in field_errors["deadline"][0]
    html = response.content.decode()
    assert html.index('for="id_deadline"') < html.index('class="errorlist"')
    assert Run.objects.get(pk=run.pk).status == "failed"
    assert deadline_of(run) == run.deadline


def test_a_deadline_that_passed_is_not_offered_to_keep(operator):
    run = failed(timezone.now() + timedelta(seconds=2))
    Run.objects.filter(pk=run.pk).update(deadline=timezone.now() - timedelta(minutes=5))
    run.refresh_from_db()
    form = operator.get(act(run, "retry")).context["form"]
    assert form["deadline"].value() is None
    assert f"The run's deadline, {shown_deadline(run.deadline)}, has passed" in (
        form.fields["deadline"].help_text
    )


def test_rerun_keeps_the_deadline_as_shown_too(operator):
    run = failed()
    step = run.steps.get(name="charge")
    data = {"step": step.pk, "reason": "", "deadline": shown_deadline(run.deadline)}
    response = operator.post(act(run, "rerun"), data)
    assert response.status_code == 302
    assert deadline_of(run) == run.deadline


def test_a_run_whose_compensation_failed_is_retried_without_a_deadline(operator):
    run = workflows.start_run(Unwinding, {}, deadline=timedelta(hours=2))
    run_pending()
    assert Run.objects.get(pk=run.pk).status == "compensation_failed"
    form = operator.get(act(run, "retry")).context["form"]
    assert form["deadline"].value() is None
    assert "no deadline stops" in form.fields["deadline"].help_text
    response = operator.post(act(run, "retry"), {"deadline": ""})
    assert notes(response)[-1].startswith(f"Run {str(run.pk)[:8]} is now compensating")
