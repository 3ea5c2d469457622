"""List usage budgets; create, raise or reset one (releasing the work it held); report
usage made outside any step."""

from __future__ import annotations

import argparse
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.utils.dateparse import parse_duration

from workflows.management.arguments import acting_user, refusals_as_command_errors
from workflows.management.base import DeclaredCommand
from workflows.management.options import (
    Subcommand,
    Subcommands,
    argument,
    json_option,
    user_option,
)
from workflows.management.output import table, to_json
from workflows.services import budgets as budget_services
from workflows.text.durations import duration

COLUMNS = (
    "ID",
    "WORKFLOW",
    "DIMENSION",
    "PER",
    "KEY",
    "USED",
    "LIMIT",
    "PERIOD ENDS",
    "WHEN EXHAUSTED",
    "HELD",
    "BREACHES",
)


# The budget counter a change names, and what it records.
BUDGET = (
    argument("workflow", metavar="WORKFLOW", help="the workflow's name"),
    argument("dimension", metavar="DIMENSION", help="the budget's dimension"),
)
CHANGE = (
    argument("--key", default="", metavar="K", help="the business key of a per-key budget"),
    user_option("username recorded as who did it"),
    json_option("the change"),
)


def _number(value: Decimal) -> str:
    return format(value.normalize(), "f")


def number(text: str) -> Decimal:
    """argparse type of ``--limit``: a decimal number, refused at parse time otherwise
    ("invalid number value")."""
    try:
        return Decimal(text)
    except ArithmeticError:
        raise ValueError(text) from None


def period(text: str) -> timedelta:
    """argparse type of ``--period``: seconds (3600) or an ISO 8601 duration (PT1H, P1D).
    Whether it is positive is the service's to say."""
    found = parse_duration(text.strip())
    if found is None:
        raise argparse.ArgumentTypeError(
            f"PERIOD must be seconds or an ISO 8601 duration (PT1H), got {text!r}"
        )
    return found


class Command(DeclaredCommand):
    help = (
        "Usage budgets (Workflow.budgets, counted from ctx.report_usage). Without an "
        "action, or with 'list': every budget counter with its usage in the current "
        "period, limit, when the period ends, what happens when it is used up, and how "
        "many ready steps and items it holds now. 'raise WORKFLOW DIMENSION --limit N "
        "[--key K]' sets the limit; 'reset WORKFLOW DIMENSION [--key K]' sets the usage "
        "back to 0; both let the work the budget held start again. --key names one "
        "business key's budget (per='business_key'); without it, the workflow's. 'create "
        "WORKFLOW DIMENSION --limit N [--per business_key] [--period PT1H] "
        "[--on-exhausted fail]' creates or changes a budget without a deploy (it wins over "
        "one the workflow declares on the same dimension and per). 'report WORKFLOW "
        "DIMENSION --amount N [--key K]' records usage made outside any step."
    )

    arguments = (
        Subcommands(
            "action",
            (
                Subcommand(
                    "list",
                    "list the budget counters (the default)",
                    (
                        argument("--workflow", metavar="NAME", help="only this workflow's budgets"),
                        json_option("the budgets"),
                    ),
                ),
                Subcommand(
                    "raise",
                    "set a budget's limit",
                    (
                        *BUDGET,
                        argument(
                            "--limit",
                            required=True,
                            type=number,
                            metavar="N",
                            help="the new limit, a number >= 0",
                        ),
                        *CHANGE,
                    ),
                ),
                Subcommand("reset", "set a budget's usage back to 0", (*BUDGET, *CHANGE)),
                Subcommand(
                    "create",
                    "create or change a budget without a deploy",
                    (
                        *BUDGET,
                        argument(
                            "--limit",
                            required=True,
                            type=number,
                            metavar="N",
                            help="the limit, a number >= 0",
                        ),
                        argument(
                            "--per",
                            choices=("workflow", "business_key"),
                            default="workflow",
                            help="count the whole workflow's usage (the default) or each "
                            "business key's apart",
                        ),
                        argument(
                            "--period",
                            type=period,
                            metavar="PERIOD",
                            help="start counting from zero each period: seconds or an ISO "
                            "8601 duration (PT1H, P1D); without it, never",
                        ),
                        argument(
                            "--on-exhausted",
                            choices=("hold", "fail"),
                            default="hold",
                            help="what a used-up budget does to the work it covers",
                        ),
                        user_option("username recorded as who did it"),
                        json_option("the budget"),
                    ),
                ),
                Subcommand(
                    "report",
                    "record usage made outside any step",
                    (
                        *BUDGET,
                        argument(
                            "--amount",
                            required=True,
                            type=number,
                            metavar="N",
                            help="how much was used, a number >= 0",
                        ),
                        *CHANGE,
                    ),
                ),
            ),
            default="list",
        ),
        # Listing is the default: its options work without the word "list" too.
        argument("--workflow", metavar="NAME", help="list only this workflow's"),
        argument("--json", action="store_true", help="print JSON"),
    )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "list":
            self._list(options)
            return
        if options["action"] == "create":
            self._create(options)
            return
        if options["action"] == "report":
            self._report(options)
            return
        with refusals_as_command_errors():
            user = acting_user(options["user"], f"{options['action']}_budget")
            if options["action"] == "raise":
                change = budget_services.raise_budget(
                    options["workflow"],
                    options["dimension"],
                    limit=options["limit"],
                    scope_key=options["key"],
                    user=user,
                )
            else:
                change = budget_services.reset_budget(
                    options["workflow"], options["dimension"], scope_key=options["key"], user=user
                )
        if options["json"]:
            self.stdout.write(to_json(change))
            return
        scope = f" for business key {change.scope_key!r}" if change.scope_key else ""
        self.stdout.write(
            f"budget {change.dimension!r} of {change.workflow_name}{scope}: "
            f"{_number(change.used)} used of {_number(change.limit)} "
            f"(was {_number(change.used_before)} of {_number(change.limit_before)}); "
            f"{change.released} held steps and items released"
        )

    def _create(self, options: dict[str, Any]) -> None:
        with refusals_as_command_errors():
            made = budget_services.create_budget(
                options["workflow"],
                options["dimension"],
                limit=options["limit"],
                per=options["per"],
                period=options["period"],
                on_exhausted=options["on_exhausted"],
                user=acting_user(options["user"], "create_budget"),
            )
        if options["json"]:
            self.stdout.write(to_json(made))
            return
        budget = made.budget
        every = f" every {duration(budget.period)}" if budget.period else ""
        self.stdout.write(
            f"budget {budget.dimension!r} of {options['workflow']} per {budget.per} "
            f"{'created' if made.created else 'changed'}: limit "
            f"{_number(Decimal(budget.limit))}{every}, {budget.on_exhausted}s when used up; "
            f"{made.counters} counters set, {made.released} held steps and items released"
        )

    def _report(self, options: dict[str, Any]) -> None:
        with refusals_as_command_errors():
            views = budget_services.report_usage(
                options["workflow"],
                options["dimension"],
                options["amount"],
                scope_key=options["key"],
                user=acting_user(options["user"], "report_usage"),
            )
        if options["json"]:
            self.stdout.write(to_json([view.as_dict() for view in views]))
            return
        for view in views:
            scope = f" for business key {view.scope_key!r}" if view.scope_key else ""
            self.stdout.write(
                f"budget {view.dimension!r} of {view.workflow_name}{scope}: "
                f"{_number(view.used)} used of {_number(view.limit)}"
                + (" (exhausted)" if view.exhausted else "")
            )

    def _list(self, options: dict[str, Any]) -> None:
        views = [
            budget_services.budget_view(counter)
            for counter in budget_services.budget_counters(workflow=options["workflow"])
        ]
        if options["json"]:
            self.stdout.write(to_json([view.as_dict() for view in views]))
            return
        if not views:
            self.stdout.write("no budget has been used yet")
            return
        rows = (
            [
                view.id,
                view.workflow_name,
                view.dimension,
                view.per,
                view.scope_key,
                _number(view.used),
                _number(view.limit),
                view.period_ends_at,
                view.on_exhausted or "(not declared)",
                view.held,
                view.breaches,
            ]
            for view in views
        )
        self.stdout.write(table(COLUMNS, rows))
