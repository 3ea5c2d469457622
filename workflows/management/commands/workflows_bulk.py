"""Apply one run verb to every run a filter selects, or with --dry-run say what it would do."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError

from workflows.management.arguments import (
    acting_user,
    parse_age,
    priority_number,
    refusals_as_command_errors,
)
from workflows.management.base import DeclaredCommand
from workflows.management.options import Group, argument, dry_run_option, user_option
from workflows.management.output import to_json
from workflows.services.bulk import (
    BULK_RUN_VERBS,
    VERB_OPTIONS,
    BulkItem,
    BulkResult,
    bulk,
    iter_bulk,
    select_runs,
)
from workflows.status import RunStatus

FILTERS = ("status", "workflow", "older_than", "business_key")
SELECTION = (
    argument(
        "--status",
        nargs="+",
        action="extend",
        metavar="S",
        help=f"runs in any of these statuses: {', '.join(RunStatus.values)}",
    ),
    argument("--workflow", metavar="W", help="runs of this workflow (name)"),
    argument(
        "--older-than",
        metavar="AGE",
        help="runs created more than AGE ago: a whole number and s, m, h or d (30m, 2d)",
    ),
    argument("--business-key", metavar="B", help="runs with this business key"),
    argument("--all", action="store_true", help="allow a bulk without any filter: every run"),
)
VERB_ARGUMENTS = (
    argument(
        "--from-step",
        metavar="NAME",
        help="rerun: the step (by name, the same in every run) to run again with "
        "everything downstream of it",
    ),
    argument(
        "--priority",
        metavar="PRIORITY",
        type=priority_number,
        help="priority, required: each run's new priority, -1000 to 1000 (higher is "
        "claimed first), as workflows_priority sets it",
    ),
    argument(
        "--reason", metavar="T", help="cancel, terminate, pause, rerun: why, kept on each run"
    ),
    argument(
        "--no-compensate",
        dest="compensate",
        action="store_false",
        default=None,
        help="cancel: end the runs without running their compensations",
    ),
    user_option("username recorded as the actor on each run"),
)


def item_line(item: BulkItem) -> str:
    """One line per run: its id, status and what the bulk did (or would do) with it."""
    line = f"run {item.run}: {item.status or '-'}: {item.outcome}"
    if item.code:
        line += f" [{item.code}]"
    if item.reason:
        line += f" ({item.reason})"
    return line


def totals_line(result: BulkResult) -> str:
    counts = ", ".join(f"{count} {name}" for name, count in result.totals().items())
    if result.dry_run:
        return f"dry run of {result.verb}: {counts}; nothing was changed"
    return f"{result.verb}: {counts}"


class Command(DeclaredCommand):
    help = (
        "Apply VERB to every run the filters select, one run at a time, each in its own "
        "transaction: a run the verb refuses is skipped, one that fails is reported, and "
        "the batch goes on. Prints one line per run and a totals line; exits with status "
        "1 if any run failed. With --dry-run nothing is changed: each run is reported as "
        "eligible or skipped (with the reason) by the verb's rule on its current status, "
        "which the verb checks again when applied. Filters combine (all must hold); "
        "without any, the command refuses unless --all is given. "
        f"VERB is one of: {', '.join(BULK_RUN_VERBS)}; rerun needs --from-step and priority "
        "needs --priority. Examples: workflows_bulk retry --status failed --workflow "
        "billing --older-than 2h --dry-run, then the same without --dry-run; "
        "workflows_bulk priority --priority 50 --workflow billing --status waiting queued."
    )

    arguments = (
        argument("verb", metavar="VERB", help=f"one of: {', '.join(BULK_RUN_VERBS)}"),
        Group("which runs", SELECTION),
        Group("what the verb does", VERB_ARGUMENTS),
        Group(
            "output",
            (
                dry_run_option("change nothing; say what the verb would do"),
                argument(
                    "--json",
                    action="store_true",
                    help='print {"verb", "dry_run", "totals", "runs": [...]} as JSON at the end',
                ),
            ),
        ),
    )

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["all"] and not any(options[name] for name in FILTERS):
            raise CommandError(
                "no filter given, so this would select every run: narrow it with --status, "
                "--workflow, --older-than or --business-key, or pass --all to mean every run"
            )
        verb_options = {name: options[name] for name in VERB_OPTIONS if options[name] is not None}
        older_than = parse_age(options["older_than"]) if options["older_than"] else None
        with refusals_as_command_errors():
            runs = select_runs(
                statuses=options["status"] or (),
                workflow=options["workflow"],
                older_than=older_than,
                business_key=options["business_key"],
            )
            call = {"dry_run": options["dry_run"], "user": acting_user(options["user"], "bulk")}
            if options["json"]:
                result = bulk(options["verb"], runs, **call, **verb_options)
                self.stdout.write(
                    to_json(
                        {
                            "verb": result.verb,
                            "dry_run": result.dry_run,
                            "totals": result.totals(),
                            "runs": [item._asdict() for item in result.items],
                        }
                    )
                )
            else:
                # Lines are printed as the runs are acted on, and not kept.
                result = BulkResult(options["verb"], options["dry_run"], keep_items=False)
                for item in iter_bulk(options["verb"], runs, **call, **verb_options):
                    result.add(item)
                    self.stdout.write(item_line(item))
                self.stdout.write(totals_line(result))
        if result.failed:
            raise CommandError(f"{result.failed} of {result.matched} run(s) failed")
