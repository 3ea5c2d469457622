"""Schedules: each starts runs of one workflow on a calendar, one run per slot.

The row holds the specification (as ``workflows.definitions.schedules.ScheduleSpec``
checks it) and the firing state: the next slot not yet decided and when it fires, the
slots waiting for an earlier run to end (overlap ``buffer_*``, ``*_other``), and
counters. Only ``workflows.engine.schedules`` and the schedule verbs write it, each
write a compare-and-set on ``version``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q

from workflows.definitions.schedules import OVERLAP_POLICIES, ScheduleSpec
from workflows.definitions.schedules.spec import DEFAULT_CATCHUP_WINDOW, MAX_KEY_LENGTH


class ScheduleOrigin(models.TextChoices):
    """Who made a schedule: an operator or a program (``create_schedule``, the API, the
    admin, the command), or a workflow class's ``schedules`` list."""

    OPERATOR = "operator"
    CODE = "code"


class Schedule(models.Model):
    """One schedule: a cron expression or an interval, in a zone, starting runs of a
    workflow with one input; ``workflows.Schedule`` declares one in code."""

    id = models.BigAutoField(primary_key=True)
    key = models.CharField(max_length=MAX_KEY_LENGTH, unique=True)
    workflow_name = models.CharField(max_length=200)
    cron = models.CharField(max_length=200, blank=True, default="")
    every = models.DurationField(null=True, blank=True)
    tz = models.CharField(max_length=64, default="UTC")
    input = models.JSONField(default=dict, blank=True)
    overlap = models.CharField(
        max_length=16, choices=[(p, p) for p in OVERLAP_POLICIES], default="skip"
    )
    catchup_window = models.DurationField(default=DEFAULT_CATCHUP_WINDOW)
    jitter = models.DurationField(null=True, blank=True)
    start_at = models.DateTimeField(null=True, blank=True)
    end_at = models.DateTimeField(null=True, blank=True)
    # The digest of the specification: a second creation with this key and another
    # spec is an IdempotencyConflict (ScheduleSpec.fingerprint).
    spec_hash = models.CharField(max_length=64)
    origin = models.CharField(
        max_length=16, choices=ScheduleOrigin.choices, default=ScheduleOrigin.OPERATOR
    )
    paused = models.BooleanField(default=False)
    # Why it is paused, or a remark about it (shown with the schedule).
    note = models.TextField(blank=True, default="")
    # The next slot not decided yet, and when it fires (the slot plus its jitter); both
    # NULL once the schedule is past its end_at.
    next_slot_at = models.DateTimeField(null=True, blank=True)
    next_fire_at = models.DateTimeField(null=True, blank=True)
    # Slots decided but waiting for the schedule's earlier runs to end (ISO instants,
    # oldest first), and how many (the sweeper's partial index reads the count).
    buffered = models.JSONField(default=list, blank=True)
    buffered_count = models.PositiveIntegerField(default=0)
    fired_count = models.PositiveBigIntegerField(default=0)
    skipped_count = models.PositiveBigIntegerField(default=0)
    missed_count = models.PositiveBigIntegerField(default=0)
    last_fired_at = models.DateTimeField(null=True, blank=True)
    last_run = models.ForeignKey(
        "Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    version = models.PositiveIntegerField(default=1)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["key"]
        indexes = [
            # The sweeper's pass: unpaused schedules by when their next slot fires.
            models.Index(
                fields=["next_fire_at"],
                condition=Q(paused=False, next_fire_at__isnull=False),
                name="workflows_schedule_due",
            ),
            # ... and those holding slots that wait for an earlier run's end.
            models.Index(
                fields=["id"],
                condition=Q(buffered_count__gt=0),
                name="workflows_schedule_buffered",
            ),
            models.Index(fields=["workflow_name", "key"], name="workflows_schedule_workflow"),
        ]

    def __str__(self) -> str:
        return self.key

    def spec(self) -> ScheduleSpec:
        """The specification this row stores."""
        return ScheduleSpec(
            workflow=self.workflow_name,
            key=self.key,
            cron=self.cron,
            every=self.every,
            tz=self.tz,
            input=self.input,
            overlap=self.overlap,
            catchup_window=self.catchup_window,
            jitter=self.jitter,
            start_at=self.start_at,
            end_at=self.end_at,
            note=self.note,
        )

    @staticmethod
    def spec_columns(spec: ScheduleSpec) -> dict[str, Any]:
        """The columns that store ``spec`` (the note is the caller's)."""
        return {
            "workflow_name": spec.workflow,
            "cron": spec.cron,
            "every": spec.every,
            "tz": spec.tz,
            "input": spec.input,
            "overlap": spec.overlap,
            "catchup_window": spec.catchup_window,
            "jitter": spec.jitter,
            "start_at": spec.start_at,
            "end_at": spec.end_at,
            "spec_hash": spec.fingerprint(),
        }

    def buffered_slots(self) -> list[datetime]:
        """The slots waiting for an earlier run to end, oldest first."""
        return [datetime.fromisoformat(text) for text in self.buffered]
