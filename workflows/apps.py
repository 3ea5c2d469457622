"""App configuration: discovers workflow definitions and registers system checks."""

from __future__ import annotations

from django.apps import AppConfig


class WorkflowsConfig(AppConfig):
    name = "workflows"
    verbose_name = "Workflows"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from workflows import checks  # noqa: F401  (registers the system checks)
        from workflows.definitions.registry import autodiscover

        autodiscover()
