"""Apply one run verb to every run a filter selects, or one unit verb to every step, item
or compensation (--units), or with --dry-run say what it would do."""

from __future__ import annotations

from datetime import timedelta
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
    UnitItem,
    bulk,
    iter_bulk,
    select_runs,
)
from workflows.services.bulk_units import HELD_ON, UNIT_KINDS, UNIT_VERBS, iter_bulk_units
from workflows.status import RunStatus
from workflows.text import short_id

FILTERS = ("status", "workflow", "older_than", "business_key", "queue", "held_on")
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
UNIT_SELECTION = (
    argument(
        "--units",
        metavar="KIND",
        choices=tuple(UNIT_KINDS),
        help=f"act on units of work instead of runs: {', '.join(UNIT_KINDS)}; --status, "
        "--workflow and --older-than then select units (--older-than: unchanged for that "
        "long), and VERB is a unit verb",
    ),
    argument("--queue", metavar="Q", help="units: routed to this queue"),
    argument(
        "--held-on",
        metavar="HOLD",
        help=f"units: held as explain says, one of {', '.join(HELD_ON)}",
    ),
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
        "--reason",
        metavar="T",
        help="cancel, terminate, pause, rerun, and the unit verbs revoke and fail_step: "
        "why, kept on each run or unit",
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


def unit_line(item: UnitItem) -> str:
    """One line per unit: which it is, its status and attempt, and what the bulk did."""
    of_item = f" item {item.item}" if item.item else ""
    line = (
        f"{item.kind} {item.unit} (run {short_id(item.run)}, step {item.step}{of_item}): "
        f"{item.status}, attempt {item.attempt}: {item.outcome}"
    )
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
        "workflows_bulk priority --priority 50 --workflow billing --status waiting queued. "
        "With --units KIND the verb acts on stuck units of work instead, one unit per "
        "transaction, each pinned to the status and attempt read (a unit that moved on "
        "since is skipped, never overwritten): VERB is one of "
        f"{', '.join(UNIT_VERBS)} (retry_step: steps only), e.g. workflows_bulk revoke "
        "--units step --held-on lease --workflow billing --dry-run; workflows_bulk "
        "fail_step --units item --status ready --queue gpu --older-than 2h --reason 'no "
        "gpu workers'."
    )

    arguments = (
        argument(
            "verb",
            metavar="VERB",
            help=f"one of: {', '.join(BULK_RUN_VERBS)}; with --units: {', '.join(UNIT_VERBS)}",
        ),
        Group("which runs", SELECTION),
        Group("which units (instead of runs)", UNIT_SELECTION),
        Group("what the verb does", VERB_ARGUMENTS),
        Group(
            "output",
            (
                dry_run_option("change nothing; say what the verb would do"),
                argument(
                    "--json",
                    action="store_true",
                    help='print {"verb", "dry_run", "totals", "runs": [...]} as JSON at the end '
                    '(with --units: "kind" and "units": [...] instead of "runs")',
                ),
            ),
        ),
    )

    def handle(self, *args: Any, **options: Any) -> None:
        noun = "unit" if options["units"] else "run"
        if not options["all"] and not any(options[name] for name in FILTERS):
            raise CommandError(
                f"no filter given, so this would select every {noun}: narrow it with "
                "--status, --workflow, --older-than, --business-key (runs), --queue or "
                f"--held-on (units), or pass --all to mean every {noun}"
            )
        verb_options = {name: options[name] for name in VERB_OPTIONS if options[name] is not None}
        older_than = parse_age(options["older_than"]) if options["older_than"] else None
        call = {"dry_run": options["dry_run"], "user": acting_user(options["user"], "bulk")}
        with refusals_as_command_errors():
            if options["units"]:
                result = self._units(options, older_than, call, verb_options)
            else:
                if options["queue"] or options["held_on"]:
                    raise CommandError("--queue and --held-on select units: give --units KIND")
                runs = select_runs(
                    statuses=options["status"] or (),
                    workflow=options["workflow"],
                    older_than=older_than,
                    business_key=options["business_key"],
                )
                if options["json"]:
                    result = bulk(options["verb"], runs, **call, **verb_options)
                    self._json(result, "runs")
                else:
                    # Lines are printed as the runs are acted on, and not kept.
                    result = BulkResult(options["verb"], options["dry_run"], keep_items=False)
                    for item in iter_bulk(options["verb"], runs, **call, **verb_options):
                        result.add(item)
                        self.stdout.write(item_line(item))
                    self.stdout.write(totals_line(result))
        if result.failed:
            raise CommandError(f"{result.failed} of {result.matched} {noun}(s) failed")

    def _units(
        self,
        options: dict[str, Any],
        older_than: timedelta | None,
        call: dict[str, Any],
        verb_options: dict[str, Any],
    ) -> BulkResult:
        """The bulk over units: as over runs, one line per unit as it is acted on."""
        if options["business_key"]:
            raise CommandError("--business-key selects runs; units are selected without it")
        units = {
            "kind": options["units"],
            "statuses": options["status"] or (),
            "workflow": options["workflow"],
            "queue": options["queue"],
            "held_on": options["held_on"],
            "older_than": older_than,
        }
        if options["json"]:
            result = bulk(options["verb"], units=units, **call, **verb_options)
            self._json(result, "units")
            return result
        result = BulkResult(options["verb"], options["dry_run"], False, options["units"])
        for item in iter_bulk_units(options["verb"], units, **call, **verb_options):
            result.add(item)
            self.stdout.write(unit_line(item))
        self.stdout.write(totals_line(result))
        return result

    def _json(self, result: BulkResult, listed: str) -> None:
        body = {"verb": result.verb, "dry_run": result.dry_run, "totals": result.totals()}
        if listed == "units":
            body["kind"] = result.units
        body[listed] = [item._asdict() for item in result.items]
        self.stdout.write(to_json(body))
