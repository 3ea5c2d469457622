"""The demo's bundled label printer (``flowsite/label_printer.py``) against a live site:
a process of its own that speaks HTTP only, signed in as the demo's service account,
prints the label of a dispatch (a heartbeat with progress, a log line, the output) and
stops at once when told to, even waiting in a long poll."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User

import workflows
from flowsite.demo.label_account import TOKEN, ensure_label_printer
from workflows.models import Frame, Run, Step
from workflows.testing import run_pending

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

PRINTER = Path(__file__).resolve().parents[2] / "flowsite" / "label_printer.py"
# Bounds on waits that end long before them; never asserted as durations.
JOB_BOUND = 60
# Under the printer's long poll (CLAIM_WAIT, 20 s), so that a printer which only saw
# the signal once its poll ended would still fail; 10 s was once too short for a
# process starved of CPU on a loaded 2-core machine.
STOP_BOUND = 15


@pytest.fixture
def printer(live_server) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start the printer against ``live_server`` with the demo's token and ``options``;
    whatever still runs at the test's end is killed."""
    started: list[subprocess.Popen[str]] = []

    def start(*options: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, str(PRINTER), "--url", live_server.url, "--token", TOKEN, *options],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate()


def label_ready() -> Run:
    """A dispatch approved and packed: its ``print_label`` is ready for the printer."""
    ensure_label_printer()
    run = workflows.start_run(
        "warehouse_dispatch",
        {"order_id": "W-9", "card": "valid", "parcels": [{"id": "P1", "weight_kg": 1}]},
    )
    run_pending()
    admin = User.objects.create_superuser("boss")
    workflows.approve_gate(run.steps.get(name="approval"), user=admin, selections=["express"])
    run_pending()
    assert run.steps.get(name="print_label").status == "ready"
    return run


def test_the_label_printer_prints_a_dispatch_label_over_http(printer):
    run = label_ready()
    process = printer("--once", "--worker", "printer-test")
    output, _ = process.communicate(timeout=JOB_BOUND)
    assert process.returncode == 0, output
    step = Step.objects.get(run=run, name="print_label")
    assert step.status == "completed", output
    assert step.output == {"label": "LBL-W-9", "parcels": 1, "by": "printer-test"}
    assert (step.progress_done, step.progress_total) == (1, 1)
    assert list(Frame.objects.filter(step=step).values_list("text", flat=True)) == [
        "label LBL-W-9 printed for 1 parcels"
    ]
    assert "printed LBL-W-9" in output


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_the_label_printer_stops_at_once_when_told_to(printer, signum):
    ensure_label_printer()
    process = printer("--worker", "printer-idle")
    # Nothing to print: it waits in a long poll (or between two tries) until signalled.
    assert process.stdout is not None
    assert "claiming from queue 'labels'" in process.stdout.readline()
    process.send_signal(signum)
    output, _ = process.communicate(timeout=STOP_BOUND)
    assert process.returncode == 0, output
    assert "label_printer: stopped" in output
