"""The history: the events of runs and flows (also the outbox), the log frames a
running attempt wrote, and the named consumers reading the events across runs."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from workflows.models.runs import Run
from workflows.models.steps import Step
from workflows.status import FrameStream


class Event(models.Model):
    """One entry of a run's history, written in the transaction that made it true.

    ``published`` makes the table usable as a transactional outbox.
    """

    id = models.BigAutoField(primary_key=True)
    # No index of its own: ``workflows_event_run`` (run, id) serves every lookup by run,
    # and each event written would otherwise update one more index.
    # Empty for an event of a flow as a whole (``flow.sealed``, ``flow.completed``, ...).
    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.CASCADE, related_name="events", db_index=False
    )
    step = models.ForeignKey(
        Step, null=True, blank=True, on_delete=models.CASCADE, related_name="events"
    )
    # The flow of a flow's event, whether about one member (``run`` set) or the whole.
    flow = models.ForeignKey(
        "Flow",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="events",
        db_index=False,
    )
    # The schedule of a schedule's event (``schedule.fired`` with its run, or
    # ``schedule.skipped``, ``schedule.missed``, ... without one); kept, emptied, when the
    # schedule is deleted.
    schedule = models.ForeignKey(
        "Schedule",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="events",
        db_index=False,
    )
    type = models.CharField(max_length=64)
    payload = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    published = models.BooleanField(default=False)
    # The writing transaction's id on PostgreSQL (``pg_current_xact_id()``, the column's
    # default there, set by migration 0018); 0 on SQLite, whose writers commit one at a
    # time in id order. Cursors order events by (xid, id) and read only below the
    # visibility horizon, so an event that commits after one with a higher id is never
    # skipped (``workflows.queries.event_cursor``). Never written by the application.
    xid = models.BigIntegerField(db_default=0, editable=False)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["run", "id"], name="workflows_event_run"),
            # The commit order every cursor reads in (consumers across runs).
            models.Index(fields=["xid", "id"], name="workflows_event_commit_order"),
            # A consumer filtered by event type reads only its types after its position
            # (one range per type), not every event since: rare types stay cheap to wait for.
            models.Index(fields=["type", "xid", "id"], name="workflows_event_type_order"),
            models.Index(
                fields=["id"], condition=Q(published=False), name="workflows_event_unpublished"
            ),
            # A schedule's history; every other event stays out of it.
            models.Index(
                fields=["schedule", "id"],
                condition=Q(schedule__isnull=False),
                name="workflows_event_schedule",
            ),
            # A flow's history; runs outside flows (nearly every event) stay out of it.
            models.Index(
                fields=["flow", "id"],
                condition=Q(flow__isnull=False),
                name="workflows_event_flow",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.type} @ {self.created_at:%Y-%m-%d %H:%M:%S}"


class Frame(models.Model):
    """One log frame a running attempt wrote with ``ctx.log``: numbered per step (``seq``,
    the tail cursor), on across attempts, and kept within a bound per attempt."""

    id = models.BigAutoField(primary_key=True)
    # No index of its own: the unique (step, seq) leads with it.
    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="frames", db_index=False)
    seq = models.PositiveBigIntegerField()
    attempt = models.PositiveIntegerField()
    stream = models.CharField(max_length=8, choices=FrameStream.choices)
    text = models.TextField()
    at = models.DateTimeField()

    class Meta:
        ordering = ["step", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["step", "seq"], name="workflows_frame_step_seq")
        ]

    def __str__(self) -> str:
        return f"{self.stream} #{self.seq}"


class EventConsumer(models.Model):
    """A named reader of the event history across runs, and how far it acknowledged.

    ``position_xid``/``position_id`` is the last acknowledged event in commit order
    (``Event.xid``, ``Event.id``); ``workflows.consume`` hands out what follows it.
    ``workflow_names``/``event_types``, when not empty, narrow what it reads and its lag
    to the events of those workflows' runs and of those types; set when it is created.
    """

    name = models.CharField(max_length=200, primary_key=True)
    position_xid = models.BigIntegerField(default=0)
    position_id = models.BigIntegerField(default=0)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    acked_at = models.DateTimeField(null=True, blank=True)
    # The consumer's filter (``[]``: everything), kept sorted so equal filters compare equal.
    workflow_names = models.JSONField(default=list, blank=True)
    event_types = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["name"]
        permissions = [
            ("manage_consumers", "Can create and delete event consumers"),
        ]

    def __str__(self) -> str:
        return self.name
