"""The leased units of a step other than the step itself: the items of a fan-out and the
compensations a failed or cancelled run runs, each claimed, retried and fenced like a
step (``LeasedWork``) and reporting as a step's handler does (``UnitTelemetry``)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from workflows.models.leased import LeasedWork, UnitTelemetry, claim_indexes
from workflows.models.runs import Run
from workflows.models.steps import Step
from workflows.status import CompensationStatus


class FanOutItem(LeasedWork, UnitTelemetry):
    """One item of a fan-out step: a leased, retried, fenced unit like a step."""

    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="items")
    index = models.PositiveIntegerField()
    key = models.CharField(max_length=255)
    item = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["step", "index"]
        constraints = [
            models.UniqueConstraint(fields=["step", "key"], name="workflows_item_unique_key"),
            models.UniqueConstraint(fields=["step", "index"], name="workflows_item_unique_index"),
        ]
        indexes = [
            models.Index(fields=["step", "status", "index"], name="workflows_item_step_status"),
            *claim_indexes("item"),
        ]

    def __str__(self) -> str:
        return f"item {self.key} [{self.status}]"


class CompensationRecord(LeasedWork, UnitTelemetry):
    """Work to undo when the run fails or is cancelled, run in reverse completion order.

    Leased, retried and fenced like a step; its status never takes the waiting states.
    """

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="compensations")
    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="compensations")
    item = models.ForeignKey(
        FanOutItem, null=True, blank=True, on_delete=models.CASCADE, related_name="compensations"
    )
    handler = models.CharField(max_length=300)
    payload = models.JSONField(default=dict, blank=True)
    sequence = models.PositiveIntegerField()
    status = models.CharField(
        max_length=32, choices=CompensationStatus.choices, default=CompensationStatus.PENDING
    )

    class Meta:
        ordering = ["run", "-sequence"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "sequence"], name="workflows_compensation_unique_sequence"
            )
        ]
        indexes = [
            models.Index(
                fields=["lease_expires_at"],
                condition=Q(status=CompensationStatus.RUNNING),
                name="workflows_compensation_lease",
            ),
            models.Index(
                fields=["updated_at"],
                condition=Q(status=CompensationStatus.READY),
                name="workflows_compensation_ready",
            ),
        ]

    def __str__(self) -> str:
        return f"compensate {self.handler} #{self.sequence} [{self.status}]"
