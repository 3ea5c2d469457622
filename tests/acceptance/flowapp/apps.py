"""The acceptance test app: its ``flows`` module is autodiscovered like any user app's."""

from __future__ import annotations

from django.apps import AppConfig


class FlowAppConfig(AppConfig):
    name = "tests.acceptance.flowapp"
    label = "acceptance_flowapp"
    verbose_name = "Acceptance test workflows"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The limit, routing, deadline, loop, revoke, cancel and traces tests' workflows live
        # in modules of their own; register them too.
        from tests.acceptance.flowapp import (  # noqa: F401
            control,
            deadlines,
            external,
            limits,
            loops,
            routed,
            traced,
        )
        from tests.support.spans import export_spans_from_env

        # The traces test's processes record their spans to a file it names.
        export_spans_from_env()
