"""What waiting work waits on: signals sent to a run, and timers (durable moments)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from workflows.models.runs import Run
from workflows.models.steps import Step
from workflows.models.units import CompensationRecord, FanOutItem
from workflows.status import TimerKind, TimerStatus


class Signal(models.Model):
    """An external event sent to a run; kept until a WaitForSignal step consumes it."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="signals")
    name = models.CharField(max_length=200)
    payload = models.JSONField(null=True, blank=True)
    # NULL, not "", for "no key": the unique constraint must ignore keyless signals.
    idempotency_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    payload_hash = models.CharField(max_length=64)
    received_at = models.DateTimeField(auto_now_add=True)
    consumed_by = models.ForeignKey(
        Step, null=True, blank=True, on_delete=models.SET_NULL, related_name="consumed_signals"
    )
    consumed_at = models.DateTimeField(null=True, blank=True)
    version = models.PositiveIntegerField(default=1)

    class Meta:
        ordering = ["received_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="workflows_signal_unique_idempotency_key",
            )
        ]
        indexes = [
            models.Index(
                fields=["run", "name", "id"],
                condition=Q(consumed_by__isnull=True),
                name="workflows_signal_unconsumed",
            )
        ]

    def __str__(self) -> str:
        return f"signal {self.name} for run {self.run_id}"


class Timer(models.Model):
    """A durable moment in the future: firing it is a compare-and-set ``scheduled → fired``."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="timers")
    step = models.ForeignKey(
        Step, null=True, blank=True, on_delete=models.CASCADE, related_name="timers"
    )
    item = models.ForeignKey(
        FanOutItem, null=True, blank=True, on_delete=models.CASCADE, related_name="timers"
    )
    compensation = models.ForeignKey(
        CompensationRecord, null=True, blank=True, on_delete=models.CASCADE, related_name="timers"
    )
    kind = models.CharField(max_length=32, choices=TimerKind.choices)
    due_at = models.DateTimeField()
    status = models.CharField(
        max_length=16, choices=TimerStatus.choices, default=TimerStatus.SCHEDULED
    )
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    fired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["due_at", "id"]
        indexes = [
            models.Index(
                fields=["due_at"],
                condition=Q(status=TimerStatus.SCHEDULED),
                name="workflows_timer_due",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} timer due {self.due_at:%Y-%m-%d %H:%M:%S} [{self.status}]"
