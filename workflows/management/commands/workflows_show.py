"""Show one run: where it stands, what it waits on, what may be done, its steps and history."""

from __future__ import annotations

from typing import Any

from workflows.holds import describe
from workflows.management.arguments import refusals_as_command_errors, run_from_options
from workflows.management.base import DeclaredCommand
from workflows.management.options import RUN_ARGUMENTS, argument
from workflows.management.output import cell, payload_summary, table, to_json
from workflows.queries import describe_run
from workflows.queries.explain import Explanation, explain
from workflows.text import duration

RUN_FIELDS = {
    "id": "run",
    "workflow": "workflow",
    "version": "version",
    "status": "status",
    "title": "title",
    "trigger": "trigger",
    "business_key": "business key",
    "tags": "tags",
    "idempotency_key": "idempotency key",
    "dismissed_at": "dismissed",
    "parent_run": "parent run",
    "created_at": "created",
    "started_at": "started",
    "finished_at": "finished",
    "deadline": "deadline",
    "updated_at": "updated",
    "input": "input",
    "variables": "variables",
    "output": "output",
    "error": "error",
}
STEP_COLUMNS = (
    "ID",
    "NAME",
    "KIND",
    "STATUS",
    "ITER",
    "ATTEMPT",
    "LEASE OWNER",
    "FAILED AS",
    "ERROR",
)
EVENT_COLUMNS = ("TIME", "TYPE", "STEP", "PAYLOAD")


def error_message(error: Any) -> Any:
    """A step's error is a dict (code, message, type, ...); a table has room for its message."""
    return error.get("message", error) if isinstance(error, dict) else error


def step_row(step: dict[str, Any]) -> list[Any]:
    """A step of :func:`~workflows.queries.describe_run` as a row under :data:`STEP_COLUMNS`."""
    return [
        step["id"],
        step["name"],
        step["kind"],
        step["status"],
        step["iteration"],
        f"{step['attempt']}/{step['max_attempts']}",
        step["lease_owner"],
        step["failure_class"],
        error_message(step["error"]),
    ]


def event_row(event: dict[str, Any]) -> list[Any]:
    """An event of :func:`~workflows.queries.describe_run` as a row under :data:`EVENT_COLUMNS`."""
    return [event["created_at"], event["type"], event["step"], payload_summary(event["payload"])]


class Command(DeclaredCommand):
    help = (
        "Show run RUN: its status, tags, input, variables, output and error; whether it "
        "needs attention, "
        "what it waits on and which operator actions are allowed (and why not); each "
        "step's status, iteration (the round a loop runs it in), attempts, lease owner, the "
        "failure class of its last failed attempt "
        "(transient, permanent, timeout, lease_expired, revoked, cancelled, budget) and "
        "error; where each loop and poll stands; and its history of events, "
        "oldest first."
    )

    arguments = (
        *RUN_ARGUMENTS,
        argument(
            "--json",
            action="store_true",
            help="print the run, steps and full events, and the explanation under "
            '"explain", as JSON',
        ),
    )

    def handle(self, *args: Any, **options: Any) -> None:
        with refusals_as_command_errors():
            run = describe_run(run_from_options(options).pk)
            explanation = explain(run["id"])
        if options["json"]:
            self.stdout.write(to_json({**run, "explain": explanation.as_dict()}))
            return
        self.write_fields(run, explanation)
        self.write_explanation(explanation)
        self.stdout.write("\nsteps")
        self.stdout.write(table(STEP_COLUMNS, (step_row(step) for step in run["steps"])))
        self.stdout.write("\nhistory")
        self.stdout.write(table(EVENT_COLUMNS, (event_row(event) for event in run["events"])))

    def write_fields(self, run: dict[str, Any], explanation: Explanation) -> None:
        """The run's own fields, one ``label  value`` line each, then whether it needs
        attention and how long it has left."""
        width = max(len(label) for label in (*RUN_FIELDS.values(), "attention"))
        for key, label in RUN_FIELDS.items():
            self.stdout.write(f"{label:<{width}}  {cell(run[key])}")
        self.stdout.write(f"{'attention':<{width}}  {explanation.attention}")
        if explanation.time_left is not None:
            left = explanation.time_left
            words = "deadline passed" if explanation.deadline_passed else duration(left)
            self.stdout.write(f"{'time left':<{width}}  {words}")

    def write_explanation(self, explanation: Explanation) -> None:
        """What holds the run, one line each in the hold table's words (``--json`` has
        each entry's details), then every operator verb with its verdict."""
        self.stdout.write("\nwaiting on")
        if explanation.waiting_on:
            self.stdout.write(
                table(
                    ["KIND", "STEP", "WHAT"],
                    (
                        [
                            entry.kind,
                            entry.step,
                            describe(entry.kind, entry.step, entry.details, explanation.as_of),
                        ]
                        for entry in explanation.waiting_on
                    ),
                )
            )
        else:
            self.stdout.write(f"nothing: the run is {explanation.status}")
        if explanation.loops:
            self.stdout.write("\nloops")
            self.stdout.write(
                table(
                    ["LOOP", "KIND", "ROUND", "OF AT MOST", "ENDS WHEN"],
                    (
                        [
                            loop["loop"],
                            loop["kind"],
                            loop["iteration"],
                            loop["max_iterations"],
                            loop["ends_when"],
                        ]
                        for loop in explanation.loops
                    ),
                )
            )
        self.stdout.write("\nallowed actions")
        self.stdout.write(
            table(
                ["ACTION", "STEP", "ALLOWED", "REASON"],
                (
                    [action.verb, action.step, "yes" if action.allowed else "no", action.reason]
                    for action in explanation.allowed_actions
                ),
            )
        )
