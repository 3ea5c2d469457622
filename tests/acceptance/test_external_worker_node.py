"""The Node worker of docs/guide/external-workers.md, run as written against a live server.

The guide's one ``js`` block is the worker's only source: this test writes it to a
file and runs it with ``node`` (Node 20's global ``fetch``, no packages) against
``runserver`` on the test database. The worker claims the external step of a run,
heartbeats while it works and logs a line; the test revokes its first attempt while it
holds it, the worker meets the 409 at its next heartbeat, drops the job, claims the
step's next attempt and completes it. Node missing is a failure, not a skip: CI runs
this worker.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission, User
from rest_framework.authtoken.models import Token

import workflows
from tests.acceptance.flowapp.external import NODE_QUEUE, NodeLabels
from tests.acceptance.harness import wait_for
from workflows.models import Event, Frame, Run, Step

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "external-workers.md"
# Long enough that the worker heartbeats during it (every third of the 6 s lease) and
# the test revokes it while the worker holds it.
WORK_SECONDS = 5
# Starting Django, a claim, two attempts of WORK_SECONDS, on a loaded machine.
TIMEOUT = 120.0


def guide_worker() -> str:
    """The guide's worker: its one fenced ``js`` block."""
    blocks = re.findall(r"^```js\n(.*?)^```$", GUIDE.read_text(), re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1, f"{GUIDE} must hold exactly one js block, found {len(blocks)}"
    return blocks[0]


def node() -> str:
    found = shutil.which("node")
    if found is None:
        pytest.fail("node (v20 or later) is not on PATH: this test runs the guide's Node worker")
    version = subprocess.run([found, "--version"], capture_output=True, text=True, check=True)
    major = int(version.stdout.strip().lstrip("v").split(".")[0])
    assert major >= 20, f"the guide's worker needs Node 20 or later, found {version.stdout}"
    return found


def service_token() -> str:
    """A token of an account that may do external work and nothing else."""
    user = User.objects.create_user("node-label-service")
    user.user_permissions.add(Permission.objects.get(codename="do_external_work"))
    return Token.objects.create(user=user).key


@pytest.fixture
def worker_output(tmp_path: Path) -> Path:
    return tmp_path / "worker.out"


@pytest.fixture
def node_worker(server: str, tmp_path: Path, worker_output: Path) -> Iterator[subprocess.Popen]:
    """The guide's worker, running against ``server`` until it completed one job."""
    script = tmp_path / "worker.mjs"
    script.write_text(guide_worker())
    env = {
        **os.environ,
        "FLOWSITE_URL": server,
        "FLOWSITE_TOKEN": service_token(),
        "QUEUE": NODE_QUEUE,
        "WORKER": "node-1",
        "WORK_SECONDS": str(WORK_SECONDS),
        "JOBS": "1",
    }
    with worker_output.open("wb") as out:
        process = subprocess.Popen(
            [node(), str(script)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


def test_the_guides_node_worker_completes_a_step_and_survives_a_revoke(node_worker, worker_output):
    run = workflows.start_run(NodeLabels, {"order_id": "W-2003"})
    step = Step.objects.get(run=run, name="print_label")

    def report() -> str:
        alive = "running" if node_worker.poll() is None else f"exited {node_worker.returncode}"
        step.refresh_from_db()
        return (
            f"worker {alive}:\n{worker_output.read_text(errors='replace')}\n"
            f"step: {step.status} attempt={step.attempt} owner={step.lease_owner!r} "
            f"progress={step.progress_done}"
        )

    def beating() -> bool:
        assert node_worker.poll() is None, report()
        step.refresh_from_db()
        return step.status == "running" and step.attempt == 1 and step.progress_done is not None

    # A heartbeat of the first attempt: only a heartbeat writes the step's progress.
    wait_for("the worker's first heartbeat", beating, timeout=TIMEOUT, describe=report)
    assert step.lease_owner == "external:node-1"
    revoked = workflows.revoke_lease(step, expected_attempt=1, reason="test: take it back")
    assert revoked.revoked, report()

    try:
        returncode = node_worker.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the worker did not finish:\n{report()}") from None
    output = worker_output.read_text()
    assert returncode == 0, report()

    run = Run.objects.get(pk=run.pk)
    assert run.status == "completed", report()
    assert run.output == {"print_label": {"label": "LBL-W-2003", "attempt": 2, "by": "node-1"}}
    assert f"lost print_label of run {run.pk} (lease_lost): claiming again" in output
    assert f"completed print_label of run {run.pk}, attempt 2" in output
    step.refresh_from_db()
    assert (step.attempt, step.progress_total) == (2, WORK_SECONDS)
    revocations = Event.objects.filter(run=run, type="lease.revoked")
    assert [event.payload.get("reason") for event in revocations] == ["test: take it back"]
    assert list(Frame.objects.filter(step=step).values_list("attempt", "text")) == [
        (1, "node-1 took attempt 1"),
        (2, "node-1 took attempt 2"),
    ]
