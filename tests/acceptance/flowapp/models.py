"""What handlers saw and did, written from inside the worker processes.

The engine's own tables say what the engine decided; these say what handler code
actually experienced (which process, which attempt, which idempotency key), so the
tests can check the engine's promises from the handler's side. ``Order`` and
``Shipment`` stand for a host project's own models that runs are about.
"""

from __future__ import annotations

import uuid

from django.contrib.contenttypes.fields import GenericRelation
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


class Order(models.Model):
    """A host's own model with an integer key: runs started with ``subject=order``."""

    number = models.CharField(max_length=50)
    runs = GenericRelation(
        "workflows.Run", content_type_field="subject_type", object_id_field="subject_id"
    )

    def __str__(self) -> str:
        return self.number


class Shipment(models.Model):
    """A host's own model with a UUID key, which a run's text ``subject_id`` holds too."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    carrier = models.CharField(max_length=50)
    runs = GenericRelation(
        "workflows.Run", content_type_field="subject_type", object_id_field="subject_id"
    )

    def __str__(self) -> str:
        return f"{self.carrier} {self.id}"


class LedgerEntry(models.Model):
    """A host's own row written by a transactional handler.

    It must exist exactly when the attempt that wrote it completed: the tests compare
    its rows with the steps' outputs and ``lease.lost`` events.
    """

    run_id = models.UUIDField(db_index=True)
    step_name = models.CharField(max_length=100)
    item = models.CharField(max_length=100, blank=True, default="")
    attempt = models.PositiveIntegerField()
    pid = models.IntegerField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        verbose_name_plural = "ledger entries"

    def __str__(self) -> str:
        return f"{self.step_name} attempt {self.attempt}"
