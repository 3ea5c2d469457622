"""The benchmarks' history generator (``bench/history_sql.py``): by default its live work
grows with the history; with ``live=`` it is the same whatever the history's size."""

from __future__ import annotations

import pytest

from bench.history_sql import fill, live_era
from workflows.models import Flow, Run, Step, Timer
from workflows.status import RUN_FINAL

pytestmark = pytest.mark.django_db


def live_work() -> dict[str, int]:
    return {
        "live runs": Run.objects.exclude(status__in=RUN_FINAL).count(),
        # Gates in the inbox, sleeps with their timers, signals: one per waiting run.
        "waiting steps": Step.objects.filter(status="waiting").count(),
        "timers": Timer.objects.filter(step__status="waiting", step__kind="sleep").count(),
        "flows": Flow.objects.count(),
    }


def test_by_default_the_live_runs_are_a_share_of_the_history():
    fill(2_000)
    # The newest twentieth (100 runs), 5 statuses in 20 of them live.
    assert live_work()["live runs"] == 25
    assert Run.objects.count() == 2_000


@pytest.mark.parametrize("runs", [2_000, 4_000])
def test_with_live_the_live_work_is_the_same_at_every_size(runs):
    fill(runs, live=25)
    assert Run.objects.count() == runs
    work = live_work()
    assert 0 < work.pop("timers") < 15
    assert work == {"live runs": 25, "waiting steps": 15, "flows": 1}


def test_the_live_era_is_whole_cycles_of_statuses():
    assert live_era(125) == 500  # what 10,000 runs hold by default
    assert live_era(1) == 20
    assert live_era(0) == 0
    with pytest.raises(ValueError, match="negative"):
        live_era(-1)
