"""Validate every registered workflow definition, for deploy scripts and operators."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError

from workflows.management.base import DeclaredCommand
from workflows.management.options import json_option
from workflows.management.output import table, to_json
from workflows.queries import check_definitions


class Command(DeclaredCommand):
    help = (
        "Validate every registered workflow (upstreams, cycles, handlers that import, retry "
        "and timeout values) and list each with its version and number of steps. Exits "
        "non-zero if any definition has a problem."
    )
    # This command is the definitions check: Django's own system checks (workflows.E001)
    # would stop it with the same problems before it could list them, or print JSON.
    requires_system_checks: list[str] = []

    arguments = (json_option("each workflow and its problems"),)

    def handle(self, *args: Any, **options: Any) -> None:
        reports = check_definitions()
        broken = [report for report in reports if report.problems]
        if options["json"]:
            self.stdout.write(to_json(reports))
        else:
            self.stdout.write(
                table(
                    ["WORKFLOW", "VERSION", "STEPS", "PROBLEMS"],
                    ([r.name, r.version, r.steps, len(r.problems)] for r in reports),
                )
            )
            for report in broken:
                for problem in report.problems:
                    self.stdout.write(f"- {problem}")
        if broken:
            count = sum(len(report.problems) for report in broken)
            raise CommandError(f"{count} problem(s) in {len(broken)} workflow definition(s)")
        if not options["json"]:
            self.stdout.write(f"{len(reports)} workflow definition(s), no problems")
