"""Install or update the django-q2 schedules of the scanners."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from workflows.workers.schedules import install_schedules


class Command(BaseCommand):
    help = "Install or update the django-q2 schedules that run the scanners (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        for name, created in install_schedules():
            self.stdout.write(f"{'created' if created else 'updated'}: {name}")
