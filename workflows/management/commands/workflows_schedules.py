"""Install or update the django-q2 schedules of the scanners (not run schedules: those
are ``workflows_schedule``, singular)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from workflows.workers.schedules import install_schedules


class Command(BaseCommand):
    help = (
        "Install or update the scanners' django-q2 schedules: the periodic django-q2 tasks "
        "that run the sweeper's scanners (idempotent). Not run schedules, which start runs "
        "of a workflow on a calendar: those are workflows_schedule (singular)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        for name, created in install_schedules():
            self.stdout.write(f"{'created' if created else 'updated'}: {name}")
