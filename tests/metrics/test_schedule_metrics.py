"""Run schedules in the Prometheus scrape: slots fired, skipped and missed per schedule
(its counters) and the lateness of each fire in the window (``late_ms`` of
``schedule.fired``), in a fixed number of queries however many schedules there are."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import workflows
from tests.metrics.test_metrics import ENABLED, scrape
from tests.support.workflows import Waits, Work
from workflows.metrics.prometheus import BUCKETS, SCRAPE_QUERIES
from workflows.models import Event, Schedule
from workflows.testing import run_pending

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("enabled")]

MINUTE = timedelta(minutes=1)


@pytest.fixture
def enabled():
    with override_settings(WORKFLOWS=ENABLED):
        yield


def labelled(workflow: str, key: str) -> tuple[tuple[str, str], ...]:
    return (("schedule", key), ("workflow", workflow))


def test_slots_fired_skipped_and_missed_per_schedule(client: Client):
    workflows.create_schedule(Work, key="beat", every=MINUTE)
    workflows.create_schedule(Waits, key="held", every=MINUTE)
    run_pending(until=timezone.now() + 3 * MINUTE)
    Schedule.objects.filter(key="held").update(missed_count=4)
    samples = scrape(client)
    for workflow, key, fired, skipped, missed in (
        (Work.name, "beat", 3, 0, 0),
        (Waits.name, "held", 1, 2, 4),
    ):
        assert samples[("flowsite_schedule_slots_fired_total", labelled(workflow, key))] == fired
        assert samples[("flowsite_schedule_slots_skipped_total", labelled(workflow, key))] == (
            skipped
        )
        assert samples[("flowsite_schedule_slots_missed_total", labelled(workflow, key))] == missed


def test_lateness_is_a_histogram_of_late_ms_in_the_window(client: Client):
    workflows.create_schedule(Work, key="beat", every=MINUTE)
    run_pending(until=timezone.now() + 3 * MINUTE)
    fired = list(Event.objects.filter(type="schedule.fired").order_by("id"))
    assert len(fired) == 3
    for event, late_ms in zip(fired, (20, 700, 4000), strict=True):
        event.payload["late_ms"] = late_ms
        event.save(update_fields=["payload"])
    samples = scrape(client)
    labels = labelled(Work.name, "beat")
    name = "flowsite_schedule_lateness_seconds"
    assert samples[(f"{name}_count", labels)] == 3
    assert samples[(f"{name}_sum", labels)] == pytest.approx(4.72)
    buckets = {
        bound: samples[(f"{name}_bucket", (("le", str(bound)), *labels))] for bound in BUCKETS
    }
    assert (buckets[0.01], buckets[0.025], buckets[1.0], buckets[2.5], buckets[5.0]) == (
        0,
        1,
        2,
        2,
        3,
    )
    Event.objects.filter(type="schedule.fired").update(
        created_at=timezone.now() - timedelta(days=2)
    )
    assert not any(n.startswith(name) for n, _ in scrape(client))


def test_schedules_add_no_query_per_schedule(client: Client):
    def queries_of_one_scrape() -> int:
        with CaptureQueriesContext(connection) as captured:
            scrape(client)
        return len(captured)

    workflows.create_schedule(Work, key="one", every=MINUTE)
    run_pending(until=timezone.now() + MINUTE)
    assert queries_of_one_scrape() == SCRAPE_QUERIES
    for index in range(5):
        workflows.create_schedule(Work, key=f"more-{index}", every=MINUTE)
    run_pending(until=timezone.now() + 2 * MINUTE)
    assert queries_of_one_scrape() == SCRAPE_QUERIES
