"""Revoke the lease of a running attempt: take it from a wedged worker, now."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from workflows.engine.guards import REVOKE
from workflows.management.arguments import (
    acting_user,
    add_run_arguments,
    refusals_as_command_errors,
    run_from_options,
)
from workflows.management.output import to_json
from workflows.models import CompensationRecord, FanOutItem, Run, Step
from workflows.services import revoke_lease
from workflows.services.leases import LeasedUnit
from workflows.services.targets import step_in_run


class Command(BaseCommand):
    help = (
        "Revoke the lease of the running attempt of step STEP of run RUN (its id, a "
        "unique id prefix, or --business-key), of its fan-out item --item KEY, or of its "
        "compensation (--compensation): the worker loses the attempt now and the work "
        "goes back to ready and runs again, without using up an attempt of its retry "
        "policy. For a worker that is wedged but still heartbeating, so its lease never "
        "expires. The worker's next heartbeat raises LeaseLost and its late result is "
        "refused. Prints what was revoked and where the work stands; refused (exit status "
        "1, with the reason) unless the attempt is running."
    )

    def add_arguments(self, parser: Any) -> None:
        add_run_arguments(parser)
        parser.add_argument(
            "step", metavar="STEP", help="the step's name in the run (or the step's id)"
        )
        unit = parser.add_mutually_exclusive_group()
        unit.add_argument(
            "--item", metavar="KEY", help="revoke the attempt of the step's fan-out item KEY"
        )
        unit.add_argument(
            "--compensation",
            action="store_true",
            help="revoke the attempt of the step's running compensation",
        )
        parser.add_argument(
            "--reason", default="", metavar="TEXT", help="why, kept in the run's history"
        )
        parser.add_argument(
            "--user", metavar="U", help="username recorded in the run's history as the revoker"
        )
        parser.add_argument("--json", action="store_true", help="print the unit as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        with refusals_as_command_errors():
            run = run_from_options(options)
            step = step_in_run(run, options["step"])
            unit = revoke_lease(
                step,
                item=options["item"],
                compensation=options["compensation"],
                reason=options["reason"],
                user=acting_user(options["user"], REVOKE.name),
            )
        summary = revoked_summary(unit, step, run)
        self.stdout.write(to_json(summary) if options["json"] else revoked_line(summary))


def revoked_summary(unit: LeasedUnit, step: Step, run: Run) -> dict[str, Any]:
    """What the command prints of the unit it revoked, read after the revoke."""
    item: str | None = None
    if isinstance(unit, FanOutItem):
        kind, item = "item", unit.key
    elif isinstance(unit, CompensationRecord):
        kind, item = "compensation", unit.item.key if unit.item is not None else None
    else:
        kind = "step"
    error = unit.error or {}
    return {
        "kind": kind,
        "id": unit.pk,
        "run": str(run.pk),
        "step": step.name,
        "item": item,
        "status": unit.status,
        "revoked_attempt": error.get("attempt"),
        "revoked_owner": error.get("owner"),
        "attempt": unit.attempt,
        "max_attempts": unit.max_attempts,
        "failure_class": unit.failure_class,
    }


def revoked_line(summary: dict[str, Any]) -> str:
    """One line: which attempt of which unit was revoked, and where the work stands."""
    unit = f"step {summary['step']!r}"
    if summary["kind"] == "item":
        unit = f"item {summary['item']!r} of {unit}"
    elif summary["kind"] == "compensation":
        unit = f"compensation of {unit}"
    then = "it runs again" if summary["status"] == "ready" else "its run had stopped"
    return (
        f"revoked attempt {summary['revoked_attempt']} of {unit} of run {summary['run']} "
        f"(held by {summary['revoked_owner']!r}): now {summary['status']}; {then}, "
        f"{summary['max_attempts'] - summary['attempt']} attempt(s) left"
    )
