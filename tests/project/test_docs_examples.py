"""Every ```python block of the documentation runs here (docs/**/*.md and README.md), so
the pages cannot drift from the code. How a page's blocks are read and run is in
:mod:`tests.support.doc_examples`:

- each ``test_*`` function of a page's ``tests.py`` file runs as a test of its own, with
  the page's other files imported and the pytest fixtures it names;
- a page's loose blocks run in page order in one namespace, after :data:`GIVEN` has put
  there what the page takes from the reader's project (a run, an order); ``test_*``
  functions they define run too, then ``run_pending`` runs what the page started to the
  end and :data:`THEN` asserts what the page says happens;
- a block that cannot run as written says why on the line before it, and there are few
  (:data:`MOST_NOT_RUN`).
"""

from __future__ import annotations

import time
import types
from collections.abc import Callable
from datetime import timedelta
from typing import Any, ClassVar

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import override_settings
from django.utils import timezone

import workflows
from tests.support.doc_examples import (
    BLOCKS,
    PAGE_MODULE,
    PAGES,
    Block,
    files,
    guide_test_names,
    loose,
    page_example,
    python_blocks,
    run_guide_test,
)
from workflows.conf import workflow_settings
from workflows.definitions import Workflow
from workflows.models import Flow, Run, Schedule, WebhookEndpoint
from workflows.services.signal_tokens import send_signal_with_token
from workflows.testing import run_pending
from workflows.webhooks.signing import signed_headers

# The most blocks the pages may leave unrun: one more needs a reason here too. The 11th:
# the traces page's SDK setup, which sets the process-wide provider and exports over OTLP.
MOST_NOT_RUN = 11
# Pages whose example is a project's files: the files, and the fewest tests they hold.
EXAMPLE_FILES = {
    "guide/concepts.md": ({"catalogue/flows", "catalogue/tests"}, 3),
    "guide/flows.md": ({"builds/flows", "builds/tests"}, 5),
    "guide/live-runs.md": ({"exports/flows", "exports/tests"}, 4),
    "guide/loops.md": ({"publishing/flows", "publishing/tests"}, 6),
    "guide/schedules.md": ({"reports/flows", "reports/tests"}, 4),
    "guide/tutorial.md": ({"shop/flows", "shop/tests"}, 3),
    "guide/variables.md": ({"pricing/flows", "pricing/tests"}, 2),
    "guide/tags.md": ({"accounts/flows", "accounts/tests"}, 3),
}
ALL_BLOCKS = [block for blocks in BLOCKS.values() for block in blocks]


def test_the_parser_reads_files_markers_and_loose_blocks():
    page = (
        "Text\n```python\n# a/flows.py\nx = 1\n```\n\n"
        "<!-- example: not run (a signature) -->\n```python\nf(a, ...) -> int\n```\n"
        "```sh\nls\n```\n```python\ny = 2\n```\n```python\n# a/flows.py\nz = 3\n```\n"
    )
    blocks = python_blocks("p.md", page)
    assert [(b.id, b.file, b.not_run) for b in blocks] == [
        ("p.md:1", "a/flows", None),
        ("p.md:2", None, "a signature"),
        ("p.md:3", None, None),
        ("p.md:4", "a/flows", None),
    ]
    assert files(blocks) == {"a/flows": "# a/flows.py\nx = 1\n\n# a/flows.py\nz = 3\n"}
    assert [b.number for b in loose(blocks)] == [3]


def test_pages_are_found_wherever_they_live():
    assert {"README.md", "guide/flows.md", "api.md"} <= set(PAGES)
    assert len(ALL_BLOCKS) >= 50


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=lambda block: block.id)
def test_every_block_runs_or_says_why_not(block: Block):
    """A block that runs must at least compile (the tests below run it); one that does
    not says why in words."""
    if block.not_run:
        assert len(block.not_run.split()) >= 2, "say why the block is not run"
    else:
        compile(block.code, block.id, "exec")


def test_few_blocks_are_left_unrun():
    unrun = [block.id for block in ALL_BLOCKS if block.not_run]
    assert len(unrun) <= MOST_NOT_RUN, unrun


@pytest.mark.parametrize("page", EXAMPLE_FILES)
def test_the_page_has_the_example_files_and_tests(page: str):
    names, fewest = EXAMPLE_FILES[page]
    example = files(BLOCKS[page])
    assert set(example) == names
    (tests,) = [name for name in names if name.endswith("/tests")]
    assert len(guide_test_names(example[tests])) >= fewest


FILE_TESTS = [
    (page, name, test)
    for page, blocks in BLOCKS.items()
    for name, source in files(blocks).items()
    if name.endswith("/tests")
    for test in guide_test_names(source)
]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("page", "module", "name"), FILE_TESTS, ids=[f"{p}::{n}" for p, _, n in FILE_TESTS]
)
def test_a_pages_example_test(page: str, module: str, name: str, request: pytest.FixtureRequest):
    with page_example(page) as made:
        run_guide_test(getattr(made[module.replace("/", ".")], name), request)


# --- What the pages take from the reader's project, and what they say happens -------------


def _waiting_for(signal: str) -> Callable[[dict[str, Any]], None]:
    """Given: ``run``, a run that waits for ``signal``."""

    def given(namespace: dict[str, Any]) -> None:
        class Order(Workflow):
            __module__ = PAGE_MODULE
            name = "docs_order"
            charge = workflows.Task("shop.steps.charge_card")
            wait = workflows.WaitForSignal(signal)

        namespace["run"] = workflows.start_run(Order, {"order_id": "A-1"})
        run_pending()

    return given


def _a_failed_member(namespace: dict[str, Any]) -> None:
    """Given: ``proto_run_id``, a run failed by an outage that is over by now."""
    outage = [True]

    def compile_proto(ctx: Any) -> dict[str, str]:
        if outage[0]:
            raise workflows.PermanentError("the code generator is down")
        return {"artifact": "proto.o"}

    compile_proto.__module__, compile_proto.__qualname__ = PAGE_MODULE, "compile_proto"
    namespace["compile_proto"] = compile_proto

    class Proto(Workflow):
        __module__ = PAGE_MODULE
        name = "docs_proto"
        compile = workflows.Task(compile_proto)

    run = workflows.start_run(Proto, {})
    run_pending()
    assert Run.objects.get(pk=run.pk).status == "failed"
    outage[0] = False
    namespace["proto_run_id"] = run.pk


def _a_schedules_workflow(namespace: dict[str, Any]) -> None:
    """Given: the workflow ``nightly_report`` (the page declares it in its next section),
    registered as the reader's project has it before ``create_schedule``; a range."""

    class Nightly(Workflow):
        __module__, __qualname__ = PAGE_MODULE, "Nightly"  # the page's class, replaced by it
        name = "nightly_report"
        build = workflows.Task("reports.steps.build")

    namespace.update(start=timezone.now() - timedelta(days=3), end=timezone.now())


def _an_order_function(namespace: dict[str, Any]) -> None:
    """Given: ``order_lines``, the reader's function from an order's context to its lines."""
    namespace["order_lines"] = lambda ctx: ctx.input["lines"]


def _a_gate_a_user_and_an_order(namespace: dict[str, Any]) -> None:
    """Given: ``gate_step``, a waiting gate, ``user``, who may decide it, and ``order``, a
    saved instance of the reader's model (a group here), with a workflow for it; what
    the hooks' receivers call (``OrderOutcome``, ``notify_team``, ...), recording."""

    class OrderOutcome:
        """The reader's model, as far as the hooks' receiver uses it."""

        rows: ClassVar[list[dict[str, Any]]] = []
        objects = types.SimpleNamespace(create=lambda **row: OrderOutcome.rows.append(row))

    namespace["OrderOutcome"] = OrderOutcome
    namespace["notices"] = notices = []
    namespace["notify_team"] = lambda text, **details: notices.append((text, details))
    namespace["send_approval_email"] = lambda *ids: notices.append(ids)

    class Approval(Workflow):
        __module__ = PAGE_MODULE
        name = "docs_approval"
        approval = workflows.Gate(prompt="Go ahead?")

    class FulfilOrder(Workflow):
        __module__ = PAGE_MODULE
        name = "fulfil_order"
        ship = workflows.Task("shop.steps.ship")

    run = workflows.start_run(Approval, {})
    run_pending()
    namespace["gate_step"] = run.steps.get(name="approval")
    namespace["user"] = get_user_model().objects.create_user("approver")
    namespace["order"] = Group.objects.create(name="order A-1")
    namespace["order"].number = "A-1"


GIVEN: dict[str, Callable[[dict[str, Any]], None]] = {
    "tour.md": _a_gate_a_user_and_an_order,
    "operations/approvals.md": _a_gate_a_user_and_an_order,
    "guide/hooks.md": _a_gate_a_user_and_an_order,
    "guide/concepts.md": _waiting_for("paid"),
    "guide/flows.md": _a_failed_member,
    "guide/schedules.md": _a_schedules_workflow,
    "guide/testing.md": _waiting_for("payment_received"),
    "guide/transactions.md": _an_order_function,
}
# Files a page uses from another: the testing guide tests the tutorial's workflow, the
# tour builds the flows guide's project.
BORROWED = {
    "guide/testing.md": {"shop/flows": "guide/tutorial.md"},
    "tour.md": {"builds/flows": "guide/flows.md"},
}


def _settings_are_accepted(namespace: dict[str, Any]) -> None:
    """A page's ``WORKFLOWS`` dict is one the app accepts: every key known, read back."""
    with override_settings(WORKFLOWS=namespace["WORKFLOWS"]):
        for key, value in namespace["WORKFLOWS"].items():
            assert getattr(workflow_settings, key) == value


def _run_completed(namespace: dict[str, Any]) -> None:
    assert Run.objects.get(pk=namespace["run"].pk).status == "completed"


def _the_token_sent_the_signal(namespace: dict[str, Any]) -> None:
    send_signal_with_token(namespace["token"], {"amount": 40})
    run_pending()
    _run_completed(namespace)


def _the_member_was_retried(namespace: dict[str, Any]) -> None:
    run = Run.objects.get(pk=namespace["proto_run_id"])
    assert run.status == "completed"
    assert run.steps.get().output == {"artifact": "proto.o"}


def _the_urgent_run_went_first(namespace: dict[str, Any]) -> None:
    urgent = Run.objects.get(workflow_name="reports")
    assert (urgent.status, urgent.priority) == ("completed", 200)
    assert urgent.steps.get(name="publish").priority == 500
    _settings_are_accepted(namespace)


def _the_schedule_went_through_its_verbs(namespace: dict[str, Any]) -> None:
    assert not Schedule.objects.filter(key="nightly").exists()
    assert namespace["run"].workflow_name == "nightly_report"
    _run_completed(namespace)
    assert namespace["result"].started == []
    assert namespace["result"].would_start == 3


def _the_tours_flow_and_order_runs_ended(namespace: dict[str, Any]) -> None:
    assert Flow.objects.get(key="build-1.0").status == "completed"
    (run,) = Run.objects.for_object(namespace["order"])
    assert run.status == "completed"


def _the_receivers_heard_of_the_end(namespace: dict[str, Any]) -> None:
    """The page's receivers, connected, hear of a run's end."""
    run = workflows.start_run("fulfil_order", {})
    run_pending()
    rows = namespace["OrderOutcome"].rows
    assert {"run_id": run.pk, "workflow": "fulfil_order", "status": "completed"} in rows


def _the_endpoint_signs_what_the_receiver_verifies(namespace: dict[str, Any]) -> None:
    endpoint = namespace["endpoint"]
    assert WebhookEndpoint.objects.get(pk=endpoint.pk).event_types == [
        "run.completed",
        "run.failed",
        "gate.waiting",
    ]
    body = b'{"type":"run.completed"}'
    headers = signed_headers(endpoint.secret, "msg_1", int(time.time()), body)
    assert namespace["verify_webhook"](endpoint.secret, headers, body)
    assert not namespace["verify_webhook"](endpoint.secret, headers, body + b" ")


THEN: dict[str, Callable[[dict[str, Any]], None]] = {
    "tour.md": _the_tours_flow_and_order_runs_ended,
    "guide/budgets.md": _run_completed,
    "guide/concepts.md": _the_token_sent_the_signal,
    "guide/flows.md": _the_member_was_retried,
    "guide/limits.md": _the_urgent_run_went_first,
    "reference/settings.md": _settings_are_accepted,
    "guide/schedules.md": _the_schedule_went_through_its_verbs,
    "guide/testing.md": _run_completed,
    "guide/webhooks.md": _the_endpoint_signs_what_the_receiver_verifies,
    "install.md": _run_completed,
    "operations/traces.md": _settings_are_accepted,
    "guide/hooks.md": _the_receivers_heard_of_the_end,
}

PAGES_WITH_LOOSE_BLOCKS = [page for page, blocks in BLOCKS.items() if loose(blocks)]


@pytest.mark.django_db
@pytest.mark.parametrize("page", PAGES_WITH_LOOSE_BLOCKS)
def test_a_pages_blocks_run_in_order(page: str, request: pytest.FixtureRequest):
    with page_example(page, BORROWED.get(page)) as made:
        namespace = made[PAGE_MODULE].__dict__
        GIVEN.get(page, lambda namespace: None)(namespace)
        for block in loose(BLOCKS[page]):
            exec(compile(block.code, block.id, "exec"), namespace)
        for name in [name for name in namespace if name.startswith("test_")]:
            run_guide_test(namespace[name], request)
        run_pending()
        THEN.get(page, lambda namespace: None)(namespace)
