"""Records the demo handlers write, so their effects are visible in the admin."""

from __future__ import annotations

from django.db import models


class DemoRecord(models.Model):
    """One visible side effect of a demo step (a reservation, an invoice, a receipt)."""

    run_id = models.UUIDField(db_index=True)
    kind = models.CharField(max_length=50)
    # The step's idempotency key: a retried attempt updates its record instead of
    # writing a second one.
    idempotency_key = models.CharField(max_length=255, unique=True)
    data = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        permissions = [("approve_dispatch", "Can approve demo warehouse dispatches")]

    def __str__(self) -> str:
        return f"{self.kind} for run {self.run_id}"
