"""Revoke the lease of a running attempt: take it from a wedged worker, now."""

from __future__ import annotations

from typing import Any, cast

from django.core.management.base import CommandError

from workflows.engine.guards import REVOKE
from workflows.management.arguments import (
    acting_user,
    refusals_as_command_errors,
    run_from_options,
)
from workflows.management.base import DeclaredCommand
from workflows.management.options import (
    RUN_ARGUMENTS,
    OneOf,
    argument,
    json_option,
    reason_option,
    user_option,
)
from workflows.management.output import to_json
from workflows.models import CompensationRecord, FanOutItem, Run, Step
from workflows.services import revoke_lease
from workflows.services.leases import (
    LeasedUnit,
    RevokedLease,
    not_revoked_text,
    shown_attempts,
)
from workflows.services.targets import step_in_run


class Command(DeclaredCommand):
    help = (
        "Revoke the lease of the running attempt of step STEP of run RUN (its id, a "
        "unique id prefix, or --business-key), of its fan-out item --item KEY, or of its "
        "compensation (--compensation): the worker loses the attempt now and the work "
        "goes back to ready and runs again, without using up an attempt of its retry "
        "policy. For a worker that is wedged but still heartbeating, so its lease never "
        "expires. The worker's next heartbeat raises LeaseLost and its late result is "
        "refused. Pinned: --attempt N names the attempt you saw; when the unit is no "
        "longer in it (or it is not running) nothing changes, and the command says why "
        "and exits with status 3. Prints what was revoked and where the work stands; "
        "refused (exit status 1, with the reason) for a fan-out step or a bad argument."
    )

    arguments = (
        *RUN_ARGUMENTS,
        argument("step", metavar="STEP", help="the step's name in the run (or the step's id)"),
        OneOf(
            (
                argument(
                    "--item",
                    metavar="KEY",
                    help="revoke the attempt of the step's fan-out item KEY",
                ),
                argument(
                    "--compensation",
                    action="store_true",
                    help="revoke the attempt of the step's running compensation",
                ),
            )
        ),
        argument(
            "--attempt",
            type=int,
            required=True,
            metavar="N",
            help=(
                "the attempt to revoke, as shown (e.g. by workflows_show: a step's attempt "
                "within its round): only that one"
            ),
        ),
        argument(
            "--round",
            type=int,
            metavar="R",
            help="the step's round that attempt belongs to, as shown (default: its current one)",
        ),
        reason_option("why, kept in the run's history"),
        user_option("username recorded in the run's history as the revoker"),
        json_option("the unit"),
    )

    def handle(self, *args: Any, **options: Any) -> None:
        with refusals_as_command_errors():
            run = run_from_options(options)
            step = step_in_run(run, options["step"])
            result = revoke_lease(
                step,
                expected_attempt=options["attempt"],
                expected_round=options["round"],
                item=options["item"],
                compensation=options["compensation"],
                reason=options["reason"],
                user=acting_user(options["user"], REVOKE.name),
            )
        summary = revoked_summary(result, step, run)
        if options["json"]:
            self.stdout.write(to_json(summary))
        elif result.revoked:
            self.stdout.write(revoked_line(summary))
        if not result.revoked:  # nothing changed: not what was asked, so not a success
            raise CommandError(not_revoked_line(result, summary), returncode=NOT_REVOKED)


# Exit status when the named attempt was not revoked (1 is a refusal, 2 a usage error).
NOT_REVOKED = 3


def revoked_summary(result: RevokedLease, step: Step, run: Run) -> dict[str, Any]:
    """What the command prints of a revoke and the unit it named, read after it."""
    unit = cast("LeasedUnit", result.unit)  # filled by revoke_lease
    item: str | None = None
    if isinstance(unit, FanOutItem):
        kind, item = "item", unit.key
    elif isinstance(unit, CompensationRecord):
        kind, item = "compensation", unit.item.key if unit.item is not None else None
    else:
        kind = "step"
    error = unit.error or {}
    attempt, max_attempts = shown_attempts(unit)
    return {
        "revoked": result.revoked,
        "reason": result.reason,
        "kind": kind,
        "id": unit.pk,
        "run": str(run.pk),
        "step": step.name,
        "item": item,
        "status": unit.status,
        "revoked_attempt": result.attempt,
        "revoked_owner": error.get("owner") if result.revoked else None,
        "attempt": attempt,
        "max_attempts": max_attempts,
        "failure_class": unit.failure_class,
    }


def revoked_line(summary: dict[str, Any]) -> str:
    """One line: which attempt of which unit was revoked, and where the work stands."""
    unit = _unit(summary)
    then = "it runs again" if summary["status"] == "ready" else "its run had stopped"
    return (
        f"revoked attempt {summary['revoked_attempt']} of {unit} of run {summary['run']} "
        f"(held by {summary['revoked_owner']!r}): now {summary['status']}; {then}, "
        f"{summary['max_attempts'] - summary['attempt']} attempt(s) left"
    )


def not_revoked_line(result: RevokedLease, summary: dict[str, Any]) -> str:
    """One line: why the named attempt was not revoked, and where the unit stands."""
    return (
        f"not revoked ({result.reason}): attempt {result.attempt} of {_unit(summary)} of run "
        f"{summary['run']} {not_revoked_text(result)}; it is {summary['status']} in attempt "
        f"{summary['attempt']}"
    )


def _unit(summary: dict[str, Any]) -> str:
    unit = f"step {summary['step']!r}"
    if summary["kind"] == "item":
        return f"item {summary['item']!r} of {unit}"
    if summary["kind"] == "compensation":
        return f"compensation of {unit}"
    return unit
