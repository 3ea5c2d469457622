"""The admin shows engine rows for inspection and never lets anyone edit them."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

import workflows
from workflows.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client):
    client.force_login(User.objects.create_superuser("root"))
    return client


def test_run_pages_render_with_steps_and_history(staff_client):
    run = workflows.start_run(
        "warehouse_dispatch",
        {"order_id": "W-9", "parcels": [{"id": "P1", "weight_kg": 1}]},
    )
    assert staff_client.get(reverse("admin:workflows_run_changelist")).status_code == 200
    page = staff_client.get(reverse("admin:workflows_run_change", args=[run.pk]))
    assert page.status_code == 200
    assert b"hold_stock" in page.content
    for name in ("step", "fanoutitem", "compensationrecord", "signal", "timer"):
        assert staff_client.get(reverse(f"admin:workflows_{name}_changelist")).status_code == 200


def test_engine_rows_cannot_be_added_changed_or_deleted(staff_client):
    run = workflows.start_run(
        "warehouse_dispatch",
        {"order_id": "W-9", "parcels": [{"id": "P1", "weight_kg": 1}]},
    )
    assert staff_client.get(reverse("admin:workflows_run_add")).status_code == 403
    response = staff_client.post(
        reverse("admin:workflows_run_delete", args=[run.pk]), {"post": "yes"}
    )
    assert response.status_code == 403
    assert Run.objects.filter(pk=run.pk).exists()
