"""The Prometheus endpoint: values read from the database, its switch, who may scrape."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission, User
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

import workflows
from tests.support.handlers import AWAIT_MAPPING
from workflows import Gate, Retry, Task, Workflow
from workflows.checks import check_metrics
from workflows.conf import workflow_settings
from workflows.engine import claim_step
from workflows.metrics.prometheus import SCRAPE_QUERIES
from workflows.models import Run, Step, Timer
from workflows.testing import run_pending
from workflows.workers.runner import run_attempt
from workflows.workers.scanners import reclaim_expired_leases

pytestmark = pytest.mark.django_db

HERE = "tests.metrics.test_metrics"
TOKEN = "scrape-token-for-tests"
ENABLED = {**settings.WORKFLOWS, "METRICS_ENABLED": True, "METRICS_TOKEN": TOKEN}


def noop(ctx):
    return {"ok": True}


def fails(ctx):
    raise ConnectionError(f"attempt {ctx.attempt} failed")


class Done(Workflow):
    name = "metrics_done"
    work = Task(f"{HERE}.noop")


class Broken(Workflow):
    name = "metrics_broken"
    work = Task(f"{HERE}.fails", retry=Retry(max_attempts=2, initial_interval=timedelta(seconds=1)))


class Approval(Workflow):
    name = "metrics_approval"
    prepare = Task(f"{HERE}.noop")
    review = Gate(prompt="Ship it?", after=["prepare"])


Sample = tuple[str, tuple[tuple[str, str], ...]]


def scrape(client: Client, **headers: str) -> dict[Sample, float]:
    """The samples of one scrape with the token, keyed by name and sorted labels."""
    response = client.get("/metrics/", headers={"Authorization": f"Bearer {TOKEN}", **headers})
    assert response.status_code == 200, response.content
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


@pytest.fixture
def history() -> list[Run]:
    """Two completed runs, one failed after a retry, one waiting at a gate."""
    runs = [
        workflows.start_run(Done),
        workflows.start_run(Done),
        workflows.start_run(Broken),
        workflows.start_run(Approval),
    ]
    run_pending(until=timezone.now() + timedelta(minutes=1))
    return runs


@override_settings(WORKFLOWS=ENABLED)
def test_values_match_the_database(client, history):
    samples = scrape(client)

    def value(name: str, **labels: str) -> float:
        return samples[(name, tuple(sorted(labels.items())))]

    assert [run.status for run in Run.objects.order_by("created_at")] == [
        "completed",
        "completed",
        "failed",
        "waiting",
    ]
    assert value("flowsite_runs_started_total", workflow="metrics_done") == 2
    assert value("flowsite_runs_finished_total", workflow="metrics_done", status="completed") == 2
    assert value("flowsite_runs_finished_total", workflow="metrics_broken", status="failed") == 1
    assert value("flowsite_runs_active", workflow="metrics_approval", status="waiting") == 1
    assert value("flowsite_gates_waiting", workflow="metrics_approval") == 1

    broken = {"workflow": "metrics_broken", "step": "work"}
    assert value("flowsite_step_attempts_total", outcome="started", **broken) == 2
    assert value("flowsite_step_attempts_total", outcome="retry_scheduled", **broken) == 1
    assert value("flowsite_step_attempts_total", outcome="failed", **broken) == 1
    done = {"workflow": "metrics_done", "step": "work"}
    assert value("flowsite_step_attempts_total", outcome="completed", **done) == 2
    assert ("flowsite_step_attempts_total", (("outcome", "completed"), ("step", "review"))) not in (
        samples
    )

    finished = Step.objects.filter(run__workflow_name="metrics_done", finished_at__isnull=False)
    durations = [(s.finished_at - s.started_at).total_seconds() for s in finished]
    assert value("flowsite_step_duration_seconds_count", **done) == 2
    assert value("flowsite_step_duration_seconds_sum", **done) == pytest.approx(sum(durations))
    assert value("flowsite_step_schedule_to_start_seconds_count", **broken) == 2

    fired = Timer.objects.get(run=history[2], status="fired")
    lateness = (fired.fired_at - fired.due_at).total_seconds()
    timer_labels = {"workflow": "metrics_broken"}
    assert value("flowsite_timer_lateness_seconds_count", **timer_labels) == 1
    assert value("flowsite_timer_lateness_seconds_sum", **timer_labels) == pytest.approx(lateness)
    assert value("flowsite_timer_lateness_seconds_bucket", le="+Inf", **timer_labels) == 1


@override_settings(WORKFLOWS=ENABLED)
def test_leases_expired_are_counted_per_workflow(client):
    run = workflows.start_run(Done)
    claim_step(run.steps.get().pk, "worker-a")
    reclaim_expired_leases(now=timezone.now() + timedelta(hours=1))
    samples = scrape(client)
    assert samples[("flowsite_leases_expired_total", (("workflow", "metrics_done"),))] == 1
    key = (("outcome", "lease_expired"), ("step", "work"), ("workflow", "metrics_done"))
    assert samples[("flowsite_step_attempts_total", key)] == 1


def test_a_lost_lease_is_logged_with_its_run_step_and_attempt(caplog):
    run = workflows.start_run(Done)
    stale = claim_step(run.steps.get().pk, "worker-a")
    reclaim_expired_leases(now=timezone.now() + timedelta(hours=1))
    with caplog.at_level("WARNING", logger="workflows.runner"):
        assert run_attempt(stale) is None
    [record] = caplog.records
    assert (record.run_id, record.step, record.attempt) == (str(run.pk), "work", 1)


@override_settings(WORKFLOWS=ENABLED)
def test_histograms_count_only_the_window(client, history):
    Step.objects.update(finished_at=timezone.now() - timedelta(hours=2))
    samples = scrape(client)
    assert not any(name.startswith("flowsite_step_duration") for name, _ in samples)


@override_settings(WORKFLOWS=ENABLED)
def test_a_scrape_runs_a_fixed_number_of_queries_and_labels_no_run_ids(client):
    def queries_of_one_scrape() -> int:
        with CaptureQueriesContext(connection) as captured:
            scrape(client)
        return len(captured)

    workflows.start_run(Done)
    run_pending()
    assert queries_of_one_scrape() == SCRAPE_QUERIES
    for _ in range(5):
        workflows.start_run(Broken)
        workflows.start_run(Approval)
    run_pending(until=timezone.now() + timedelta(minutes=1))
    assert queries_of_one_scrape() == SCRAPE_QUERIES

    run_ids = {str(pk) for pk in Run.objects.values_list("pk", flat=True)}
    label_values = {value for _, labels in scrape(client) for _, value in labels}
    assert label_values.isdisjoint(run_ids)
    assert {"metrics_broken", "metrics_approval", "work", "prepare"} <= label_values


def test_disabled_metrics_are_not_found(client):
    assert workflow_settings.METRICS_ENABLED is False
    response = client.get("/metrics/", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 404


@override_settings(WORKFLOWS=ENABLED)
def test_a_scrape_needs_the_token_or_a_permitted_staff_user(client):
    assert client.get("/metrics/").status_code == 401
    wrong = client.get("/metrics/", headers={"Authorization": "Bearer not-the-token"})
    assert wrong.status_code == 401
    assert wrong["WWW-Authenticate"].startswith("Bearer")

    operator = User.objects.create_user("operator", is_staff=True)
    client.force_login(operator)
    assert client.get("/metrics/").status_code == 403
    metrics = Permission.objects.get(codename="view_metrics", content_type__app_label="workflows")
    operator.user_permissions.add(metrics)
    assert client.get("/metrics/").status_code == 200

    outsider = User.objects.create_user("outsider")  # holds the permission, but not staff
    outsider.user_permissions.add(metrics)
    client.force_login(outsider)
    assert client.get("/metrics/").status_code == 403


@override_settings(WORKFLOWS={**settings.WORKFLOWS, "METRICS_ENABLED": True})
def test_without_a_token_setting_no_bearer_token_is_accepted(client):
    assert client.get("/metrics/", headers={"Authorization": "Bearer "}).status_code == 401


@pytest.mark.parametrize(
    ("key", "value"), [("METRICS_WINDOW", timedelta(0)), ("METRICS_TOKEN", " ")]
)
def test_invalid_metrics_settings_are_refused(key, value):
    with (
        override_settings(WORKFLOWS={**settings.WORKFLOWS, key: value}),
        pytest.raises(ImproperlyConfigured, match=key),
    ):
        workflow_settings.METRICS_ENABLED  # noqa: B018


def test_enabled_metrics_without_prometheus_client_fail_the_check(monkeypatch):
    monkeypatch.setattr("workflows.checks.find_spec", lambda name: None)
    assert check_metrics() == []
    with override_settings(WORKFLOWS=ENABLED):
        assert [message.id for message in check_metrics()] == ["workflows.E011"]


class Awaiting(Workflow):
    name = "metrics_awaiting"
    load = Task(AWAIT_MAPPING, awaits=["mapping", "skip"])


@override_settings(WORKFLOWS=ENABLED)
def test_an_attempt_that_awaits_is_counted_as_awaited(client):
    run = workflows.start_run(Awaiting)
    run_pending()
    workflows.send_signal(run, "skip", None)
    run_pending()
    samples = scrape(client)
    step = (("outcome", "awaited"), ("step", "load"), ("workflow", "metrics_awaiting"))
    assert samples[("flowsite_step_attempts_total", step)] == 1
    started = (("outcome", "started"), ("step", "load"), ("workflow", "metrics_awaiting"))
    assert samples[("flowsite_step_attempts_total", started)] == 2
