"""What handlers saw and did, written from inside the worker processes.

The engine's own tables say what the engine decided; these say what handler code
actually experienced (which process, which attempt, which idempotency key), so the
tests can check the engine's promises from the handler's side.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class HandlerCall(models.Model):
    """One row per handler invocation, written before the handler does anything else."""

    run_id = models.UUIDField(db_index=True)
    step_name = models.CharField(max_length=100)
    attempt = models.PositiveIntegerField()
    idempotency_key = models.CharField(max_length=255)
    pid = models.IntegerField()
    note = models.CharField(max_length=100, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.step_name} attempt {self.attempt} in pid {self.pid}"


class SideEffect(models.Model):
    """An external effect deduplicated by idempotency key, as a payment provider would.

    The unique key plays the external system's part; the tests check that every attempt
    of a step presented the same key, so the effect happened once per step.
    """

    idempotency_key = models.CharField(max_length=255, unique=True)
    run_id = models.UUIDField(db_index=True)
    step_name = models.CharField(max_length=100)
    attempt = models.PositiveIntegerField()
    pid = models.IntegerField()
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.idempotency_key


class SharedCounter(models.Model):
    """A shared number that handlers increment: a lost or doubled update shows in its value."""

    name = models.CharField(max_length=100, unique=True)
    value = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.name}={self.value}"
