"""Run every scanner once and print what each found and did."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from django.core.management.base import CommandError

from workflows.management.base import DeclaredCommand
from workflows.management.options import dry_run_option, json_option
from workflows.workers.scanners import recover


class Command(DeclaredCommand):
    help = "Run every recovery scanner once (timers, leases, redispatch, stuck runs, purge)."

    arguments = (dry_run_option("count, change nothing"), json_option("the counts"))

    def handle(self, *args: Any, **options: Any) -> None:
        results = recover(dry_run=options["dry_run"])
        if options["json"]:
            self.stdout.write(json.dumps({k: asdict(v) for k, v in results.items()}))
        else:
            verb = "would act on" if options["dry_run"] else "acted on"
            for name, result in results.items():
                self.stdout.write(
                    f"{name:<24} found {result.found:>5}  {verb} {result.done:>5}  "
                    f"skipped {result.skipped:>3}  errors {result.errors}"
                )
        if any(result.errors for result in results.values()):
            raise CommandError("some items failed; see the log for each error")
