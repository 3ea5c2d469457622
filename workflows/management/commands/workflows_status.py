"""List the newest runs, optionally of one workflow and in one status; and how flows stand."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.management.base import CommandError
from django.db.models import Count

from workflows.management.arguments import tags_given
from workflows.management.base import DeclaredCommand
from workflows.management.options import (
    DEFAULT_LIMIT,
    argument,
    json_option,
    limit_option,
    status_option,
    tag_option,
)
from workflows.management.output import table, to_json
from workflows.models import Flow, Run
from workflows.queries import list_runs
from workflows.status import FlowStatus, RunStatus

COLUMNS = {
    "id": "ID",
    "workflow": "WORKFLOW",
    "version": "VERSION",
    "status": "STATUS",
    "business_key": "BUSINESS KEY",
    "created_at": "CREATED",
    "updated_at": "UPDATED",
    "tags": "TAGS",
}


def tags_text(tags: dict[str, str]) -> str:
    """``customer=acme region=eu``: a run's tags in a table cell ("" for none)."""
    return " ".join(f"{key}={value}" for key, value in sorted(tags.items()))


@dataclass(frozen=True)
class FlowCounts:
    """Flows by status (every status, 0 included) and the member runs blocked."""

    flows: dict[str, int]
    blocked_members: int

    def line(self) -> str:
        """``flows: 2 open, 1 failed; 3 members blocked``: the statuses some flow is in."""
        statuses = ", ".join(f"{n} {status}" for status, n in self.flows.items() if n)
        plural = "" if self.blocked_members == 1 else "s"
        return f"flows: {statuses}; {self.blocked_members} member{plural} blocked"


def flow_counts() -> FlowCounts | None:
    """How flows stand, or None when there is none (one query then; two otherwise)."""
    counts = dict(Flow.objects.order_by().values_list("status").annotate(n=Count("id")))
    if not counts:
        return None
    # Only flow members are ever blocked.
    blocked = Run.objects.filter(status=RunStatus.BLOCKED).count()
    return FlowCounts({status: counts.get(status, 0) for status in FlowStatus.values}, blocked)


class Command(DeclaredCommand):
    help = (
        "List runs, newest first: id, workflow, version, status, business key, times, tags; "
        "--tag KEY=VALUE (repeatable) lists only the runs carrying every tag given; then, "
        "when there are flows, one line with the flows by status and the members blocked. "
        "--flows prints only that (as JSON with --json)."
    )

    arguments = (
        argument("--workflow", metavar="NAME", help="only runs of this workflow"),
        status_option("runs", RunStatus.values),
        tag_option(
            "only runs carrying this tag, e.g. customer=acme; repeat for every one of several"
        ),
        limit_option("runs"),
        argument(
            "--flows",
            action="store_true",
            help="only the flows: how many are in each status, and how many members are blocked",
        ),
        json_option("the runs"),
    )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["flows"]:
            self._flows(options)
            return
        runs = list_runs(
            workflow=options["workflow"],
            status=options["status"],
            tags=tags_given(options["tags"]),
            limit=options["limit"] or DEFAULT_LIMIT,
        )
        if options["json"]:
            self.stdout.write(to_json(runs))
            return
        if runs:
            self.stdout.write(
                table(
                    COLUMNS.values(),
                    (
                        [*(run[key] for key in COLUMNS if key != "tags"), tags_text(run["tags"])]
                        for run in runs
                    ),
                )
            )
        else:
            self.stdout.write("no runs match")
        counts = flow_counts()
        if counts is not None:
            self.stdout.write("")
            self.stdout.write(counts.line())

    def _flows(self, options: dict[str, Any]) -> None:
        given = [f"--{name}" for name in ("workflow", "status", "limit") if options[name]]
        given += ["--tag"] if options["tags"] else []
        if given:
            raise CommandError(f"--flows counts flows, not runs: {', '.join(given)} do not apply")
        counts = flow_counts() or FlowCounts(dict.fromkeys(FlowStatus.values, 0), 0)
        if options["json"]:
            self.stdout.write(to_json(counts))
        else:
            self.stdout.write(counts.line() if any(counts.flows.values()) else "no flows")
