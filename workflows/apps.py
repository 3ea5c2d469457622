"""App configuration: discovers workflow definitions, registers checks and schedules."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig, apps
from django.db import DEFAULT_DB_ALIAS, router
from django.db.models.signals import post_migrate


def install_schedules_after_migrate(**kwargs: Any) -> None:
    """Keep the scanners' django-q2 schedules installed when workers run the steps."""
    from workflows.engine.executor import uses_django_q
    from workflows.workers.schedules import install_schedules

    if apps.is_installed("django_q") and uses_django_q():
        install_schedules()


def install_declared_schedules_after_migrate(using: str = DEFAULT_DB_ALIAS, **kwargs: Any) -> None:
    """Install the schedules workflow classes declare (``Workflow.schedules``), once the
    database that holds schedules is migrated (a router may keep them off ``default``)."""
    from workflows.models import Schedule
    from workflows.services.schedules import install_declared_schedules

    if router.db_for_write(Schedule) == using:
        install_declared_schedules()


class WorkflowsConfig(AppConfig):
    name = "workflows"
    verbose_name = "Workflows"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from workflows import checks  # noqa: F401  (registers the system checks)
        from workflows.definitions.registry import autodiscover

        autodiscover()
        post_migrate.connect(install_schedules_after_migrate, sender=self)
        post_migrate.connect(install_declared_schedules_after_migrate, sender=self)
