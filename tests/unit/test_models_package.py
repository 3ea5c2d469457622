"""The models are a package (``workflows/models/``, one module per job), and every model
is still imported from ``workflows.models``, belongs to the app, and matches the
migrations: the split needed none."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import models as db_models
from django.test import override_settings

from workflows import models

# Every concrete model of the app, by the name it has always been imported under.
MODELS = (
    "Run",
    "RunTag",
    "Step",
    "StepIteration",
    "StepRound",
    "FanOutItem",
    "CompensationRecord",
    "Signal",
    "Timer",
    "Event",
    "Frame",
    "EventConsumer",
    "Flow",
    "FlowMember",
    "FlowEdge",
    "ConcurrencySlot",
    "RateBucket",
    "BudgetCounter",
    "RuntimeBudget",
    "UsageReport",
    "WorkerPresence",
    "WebhookEndpoint",
    "WebhookDelivery",
    "Schedule",
)


class NoMigrationHistory:
    """Before comparing the models with the migrations, ``makemigrations`` compares the
    migrations with those each database recorded as applied, for the databases a router
    lets the app migrate on. These tests have no database, and the question is the
    models: this router lets it migrate on none."""

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return False


@pytest.mark.parametrize("name", MODELS)
def test_each_model_is_imported_from_workflows_models(name: str):
    model = getattr(models, name)  # what ``from workflows.models import <name>`` gives
    assert name in models.__all__
    assert issubclass(model, db_models.Model)
    assert model._meta.app_label == "workflows"
    assert apps.get_model("workflows", name) is model


def test_the_list_is_every_model_of_the_app():
    assert {model.__name__ for model in apps.get_app_config("workflows").get_models()} == set(
        MODELS
    )


def test_the_models_match_the_migrations():
    out = StringIO()
    with override_settings(DATABASE_ROUTERS=[f"{__name__}.NoMigrationHistory"]):
        # Exits with status 1 (SystemExit, failing the test) when a migration is missing.
        call_command("makemigrations", "--check", "--dry-run", stdout=out)
    assert out.getvalue().strip() == "No changes detected"
