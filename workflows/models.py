"""The durable state of workflows: runs, their steps, timers and the event history.

Rows here are written only by ``workflows.engine``; every mutable row carries a
``version`` column that each write compares and increments (compare-and-set), and leased
rows carry ``attempt``, ``lease_owner`` and ``lease_expires_at`` for fencing.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.contrib.contenttypes.fields import GenericForeignKey
from django.contrib.contenttypes.models import ContentType
from django.db import models
from django.db.models import Q

from workflows.status import (
    CompensationStatus,
    Decision,
    DecisionVia,
    FailureClass,
    FlowStatus,
    FrameStream,
    JoinKind,
    NodeKind,
    RoundAttempts,
    RunStatus,
    StepStatus,
    TimerKind,
    TimerStatus,
    attempt_in_round,
)

# Webhook endpoints and deliveries live in their own package; importing them here makes
# them models of this app (re-exported by name).
from workflows.webhooks.models import (
    WebhookDelivery as WebhookDelivery,
    WebhookEndpoint as WebhookEndpoint,
)


def subject_of(obj: models.Model) -> dict[str, Any]:
    """The ``Run`` columns that point at ``obj``: its content type and its key as text.

    The key is stored as text so that integer, UUID and string primary keys all fit one
    column; the filter and the write use this one function, so they never disagree.
    """
    return {"subject_type": ContentType.objects.get_for_model(obj), "subject_id": str(obj.pk)}


class RunQuerySet(models.QuerySet["Run"]):
    """``Run.objects``: Django's queryset plus the runs of one of the host's objects."""

    def for_object(self, obj: models.Model) -> RunQuerySet:
        """The runs started with ``subject=obj``, newest first."""
        return self.filter(**subject_of(obj)).order_by("-created_at", "-id")


class Run(models.Model):
    """One execution of a workflow definition, pinned to the version it started with."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workflow_name = models.CharField(max_length=200)
    workflow_version = models.PositiveIntegerField()
    snapshot = models.JSONField(help_text="The workflow graph as it was when the run started.")
    status = models.CharField(max_length=32, choices=RunStatus.choices, default=RunStatus.PENDING)
    input = models.JSONField(default=dict, blank=True)
    output = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    # NULL, not "", for "no key": the unique constraint must ignore keyless runs.
    idempotency_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    input_hash = models.CharField(max_length=64, blank=True, default="")
    business_key = models.CharField(max_length=255, blank=True, default="")
    # The host's object this run is about (``start_run(subject=order)``), if any. SET_NULL,
    # as the admin's LogEntry does: a model dropped from the project leaves its runs.
    subject_type = models.ForeignKey(
        ContentType, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    subject_id = models.CharField(max_length=255, blank=True, default="")
    subject = GenericForeignKey("subject_type", "subject_id")
    parent_run = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="child_runs"
    )
    parent_step = models.ForeignKey(
        "Step", null=True, blank=True, on_delete=models.CASCADE, related_name="child_runs"
    )
    parent_item = models.ForeignKey(
        "FanOutItem", null=True, blank=True, on_delete=models.CASCADE, related_name="child_runs"
    )
    # The flow this run is a member of (its FlowMember row says as what), if any: read
    # with the run's lock, so a run's end looks for its downstream members only here.
    flow = models.ForeignKey(
        "Flow", null=True, blank=True, on_delete=models.CASCADE, related_name="runs", db_index=False
    )
    # Set by cancel_run(compensate=False): the run ends without running its compensations.
    skip_compensation = models.BooleanField(default=False)
    # Why and by whom the run was paused (empty unless paused).
    paused_reason = models.TextField(blank=True, default="")
    # Ready work is claimed highest priority first (a step may declare its own).
    priority = models.IntegerField(default=0)
    # When the run must have ended (``start_run(deadline=...)``, ``Workflow.deadline``):
    # a ``deadline`` timer fails it with ``deadline_exceeded`` then. NULL: no deadline.
    deadline = models.DateTimeField(null=True, blank=True)
    version = models.PositiveIntegerField(default=1)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        # Viewing runs is Django's own ``view_run``; starting and operating are separate,
        # and so is reading the metrics (``workflows.metrics``), which staff may need alone.
        permissions = [
            ("start_run", "Can start runs of registered workflows"),
            ("operate_run", "Can operate runs: cancel, terminate, pause, resume, retry, rerun"),
            ("view_metrics", "Can read the Prometheus metrics of all runs"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["workflow_name", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="workflows_run_unique_idempotency_key",
            )
        ]
        indexes = [
            models.Index(fields=["status", "created_at"], name="workflows_run_status"),
            models.Index(
                fields=["workflow_name", "workflow_version", "created_at"],
                name="workflows_run_workflow",
            ),
            models.Index(fields=["created_at"], name="workflows_run_created"),
            # The dashboard's runs by workflow and status: read from the index alone.
            models.Index(fields=["workflow_name", "status"], name="workflows_run_by_workflow"),
            # The runs list sorted by workflow, either way (its ties follow the sort's
            # direction): read in index order, forwards or backwards, with no sort. No
            # transition changes these columns: the index is written at the insert only.
            models.Index(
                fields=["workflow_name", "created_at", "id"], name="workflows_run_wf_sort"
            ),
            # The dashboard's runs finished per hour over the last day.
            models.Index(fields=["finished_at"], name="workflows_run_finished"),
            models.Index(fields=["business_key"], name="workflows_run_business_key"),
            # for_object and GenericRelation: one object's runs, newest first.
            models.Index(
                fields=["subject_type", "subject_id", "created_at"], name="workflows_run_subject"
            ),
            # Child runs only (cancel_orphaned_children): a few rows among every run kept,
            # where the foreign key's own index is mostly NULLs.
            models.Index(
                fields=["parent_run"],
                condition=Q(parent_run__isnull=False),
                name="workflows_run_children",
            ),
            # Runs with a deadline only: the runs list's "near their deadline" filter.
            models.Index(
                fields=["deadline"],
                condition=Q(deadline__isnull=False),
                name="workflows_run_deadline",
            ),
            # Flow members only, the same way.
            models.Index(
                fields=["flow", "status"],
                condition=Q(flow__isnull=False),
                name="workflows_run_flow",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.workflow_name} v{self.workflow_version} [{self.status}] {self.id}"


class LeasedWork(models.Model):
    """Columns of work that workers claim, lease and fence: steps, items, compensations.

    ``version`` is compared and incremented by every write; ``attempt`` and
    ``lease_owner`` fence a worker's late writes after its lease was taken over.
    """

    status = models.CharField(max_length=32, choices=StepStatus.choices, default=StepStatus.PENDING)
    attempt = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=1)
    lease_owner = models.CharField(max_length=200, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    version = models.PositiveIntegerField(default=1)
    output = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    # The class of the last failed attempt (``workflows.status.FailureClass``); empty
    # while no attempt has failed.
    failure_class = models.CharField(
        max_length=16, choices=FailureClass.choices, blank=True, default=""
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Routing (``workflows.definitions.limits.Route``): the queue whose workers may run
    # the unit and the capabilities they need (sorted, comma-separated); copied from the
    # definition when the row is written, so recovery can route without the code.
    queue = models.CharField(max_length=60, default="default")
    requires = models.CharField(max_length=300, blank=True, default="")
    # Ready units are claimed highest priority first, oldest first within a priority.
    priority = models.IntegerField(default=0)
    # Why a ready unit was not started when a worker last tried: ``concurrency:<key>``,
    # ``rate:<key>`` or ``budget:<dimension>``; empty when nothing holds it.
    held_on = models.CharField(max_length=300, blank=True, default="")

    class Meta:
        abstract = True


class Step(LeasedWork):
    """One node of a run's graph, with its own status, attempts and lease."""

    # No index of its own: the unique (run, name) and the (run, status) indexes lead with it.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="steps", db_index=False)
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=32, choices=NodeKind.choices)
    # Gate: what the approver sees and decides.
    prompt = models.TextField(blank=True, default="")
    options = models.JSONField(default=list, blank=True)
    min_selections = models.PositiveIntegerField(default=0)
    max_selections = models.PositiveIntegerField(null=True, blank=True)
    permission = models.CharField(max_length=200, blank=True, default="")
    assignees = models.JSONField(default=dict, blank=True, help_text='{"users": [], "groups": []}')
    decision = models.CharField(max_length=16, choices=Decision.choices, blank=True, default="")
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    # How the decision was made: by a decider, the timeout, or a skip (within the
    # gate's rule, or overriding it).
    decided_via = models.CharField(
        max_length=16, choices=DecisionVia.choices, blank=True, default=""
    )
    # The address the decision came from, as the caller passed it (None: not given).
    decided_from = models.GenericIPAddressField(null=True, blank=True)
    feedback = models.TextField(blank=True, default="")
    selections = models.JSONField(default=list, blank=True)
    # Who said they are deciding this gate: others may not decide it without the
    # ``workflows.override_gate_claim`` permission.
    claimed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    claimed_at = models.DateTimeField(null=True, blank=True)
    # Wait for signal: the signal name this step consumes.
    signal_name = models.CharField(max_length=200, blank=True, default="")
    # Bumped by each rerun of the step: part of its idempotency key, so external systems
    # see the rerun as new work.
    generation = models.PositiveIntegerField(default=0)
    # Loops (``Loop``, ``Task(repeat_until=...)``): the iteration the row holds, 1-based.
    # A step in a loop body counts on across the run (each iteration is also a new
    # generation); a loop node counts the rounds of its body since it was last entered
    # afresh. Finished iterations are kept as StepIteration rows.
    iteration = models.PositiveIntegerField(default=1)
    # Fan-out: counters changed in the same transaction as each item.
    items_total = models.PositiveIntegerField(default=0)
    items_completed = models.PositiveIntegerField(default=0)
    items_failed = models.PositiveIntegerField(default=0)
    items_skipped = models.PositiveIntegerField(default=0)
    # Live telemetry of the running attempt (``ctx.progress``, ``ctx.summary``,
    # ``ctx.log``), written fenced by its lease. Progress: the last value wins.
    progress_done = models.FloatField(null=True, blank=True)
    progress_total = models.FloatField(null=True, blank=True)
    progress_message = models.CharField(max_length=500, blank=True, default="")
    progress_at = models.DateTimeField(null=True, blank=True)
    # The step's summary document, changed by JSON merge patches (RFC 7386);
    # ``summary_version`` counts the patches applied.
    summary = models.JSONField(default=dict, blank=True)
    summary_version = models.PositiveIntegerField(default=0)
    # The log frames' numbering (the last ``Frame.seq`` given) and how many frames were
    # trimmed away, oldest first, to keep each attempt within its bound.
    frames_written = models.PositiveBigIntegerField(default=0)
    frames_dropped = models.PositiveBigIntegerField(default=0)
    # The round the row holds: a rerun, a retry or a loop's next iteration starts a new
    # one (the ended round is kept as a StepRound row). ``round_attempts_before``: the
    # attempts made before it (``attempt`` counts on for fencing; the round's attempt
    # is ``attempt - round_attempts_before``); ``round_frames_before``: the frames
    # numbered before it (the round's frames have a greater ``seq``).
    round = models.PositiveIntegerField(default=1)
    round_attempts_before = models.PositiveIntegerField(default=0)
    round_frames_before = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "name"], name="workflows_step_unique_name")
        ]
        indexes = [
            models.Index(fields=["run", "status"], name="workflows_step_run_status"),
            models.Index(
                fields=["updated_at"],
                condition=Q(status=StepStatus.READY),
                name="workflows_step_ready",
            ),
            # A worker's claim: the best ready step of its route.
            models.Index(
                fields=["queue", "requires", "-priority", "updated_at"],
                condition=Q(status=StepStatus.READY),
                name="workflows_step_ready_route",
            ),
            # The steps a freed concurrency slot or a raised budget lets start.
            models.Index(
                fields=["held_on", "-priority", "updated_at"],
                condition=Q(status=StepStatus.READY),
                name="workflows_step_held",
            ),
            models.Index(
                fields=["lease_expires_at"],
                condition=Q(status=StepStatus.RUNNING),
                name="workflows_step_lease",
            ),
            # The approvals list: waiting gates, oldest first, among every step ever run.
            models.Index(
                fields=["started_at", "id"],
                condition=Q(status=StepStatus.WAITING, kind=NodeKind.GATE),
                name="workflows_step_waiting_gate",
            ),
            # pending_waits: every waiting step (gate, signal, callback, sleep, child),
            # oldest first, among every step ever run.
            models.Index(
                fields=["started_at", "id"],
                condition=Q(status=StepStatus.WAITING),
                name="workflows_step_waiting",
            ),
        ]
        permissions = [
            ("override_gate_claim", "Can decide or release a gate claimed by someone else"),
            (
                "override_gate_rule",
                "Can skip a gate whose own rule does not admit them (recorded as an override)",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} [{self.status}]"

    @property
    def frames_in_round(self) -> int:
        """The log frames numbered in the current round (trimmed ones included)."""
        return self.frames_written - self.round_frames_before

    @property
    def attempts_in_round(self) -> RoundAttempts:
        """The attempt and budget of the current round, as every surface numbers them."""
        return attempt_in_round(self.attempt, self.max_attempts, self.round_attempts_before)


class StepIteration(models.Model):
    """A finished iteration of a step that a loop ran again (a body step of a ``Loop``,
    or a ``Task(repeat_until=...)``): what the step row held when the next iteration
    reset it. The step row holds the current iteration; these rows hold the ones
    before, so outputs and gate decisions of every round stay readable."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+", db_index=False)
    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="iterations")
    iteration = models.PositiveIntegerField()
    generation = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=32, choices=StepStatus.choices)
    attempt = models.PositiveIntegerField(default=0)
    # The attempts made before the iteration's round: it made ``attempt - this``.
    attempts_before = models.PositiveIntegerField(default=0)
    output = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    failure_class = models.CharField(
        max_length=16, choices=FailureClass.choices, blank=True, default=""
    )
    decision = models.CharField(max_length=16, choices=Decision.choices, blank=True, default="")
    decided_via = models.CharField(
        max_length=16, choices=DecisionVia.choices, blank=True, default=""
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    feedback = models.TextField(blank=True, default="")
    selections = models.JSONField(default=list, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # When the next iteration began.
    archived_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["step", "generation", "iteration"]
        constraints = [
            models.UniqueConstraint(
                fields=["step", "generation", "iteration"],
                name="workflows_step_iteration_unique",
            )
        ]

    def __str__(self) -> str:
        return f"{self.step_id} iteration {self.iteration} [{self.status}]"


class StepRound(models.Model):
    """An ended round of a step: what its attempts reported (progress, summary, the
    range of its log frames) when a rerun, a retry or a loop's next iteration started
    the step afresh. The step row holds the current round; its frames stay in
    ``Frame``, numbered ``frames_after + 1`` to ``frames_through``."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+", db_index=False)
    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="rounds")
    round = models.PositiveIntegerField()
    generation = models.PositiveIntegerField(default=0)
    iteration = models.PositiveIntegerField(default=1)
    status = models.CharField(max_length=32, choices=StepStatus.choices)
    # The attempts made before the round and the last attempt it made (as ``attempt``
    # counts them): the round made ``attempt - attempts_before`` of ``max_attempts -
    # attempts_before``.
    attempts_before = models.PositiveIntegerField(default=0)
    attempt = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=1)
    progress_done = models.FloatField(null=True, blank=True)
    progress_total = models.FloatField(null=True, blank=True)
    progress_message = models.CharField(max_length=500, blank=True, default="")
    progress_at = models.DateTimeField(null=True, blank=True)
    summary = models.JSONField(default=dict, blank=True)
    summary_version = models.PositiveIntegerField(default=0)
    frames_after = models.PositiveBigIntegerField(default=0)
    frames_through = models.PositiveBigIntegerField(default=0)
    frames_dropped = models.PositiveBigIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # When the next round began.
    ended_at = models.DateTimeField()

    class Meta:
        ordering = ["step", "round"]
        constraints = [
            models.UniqueConstraint(fields=["step", "round"], name="workflows_step_round_unique")
        ]

    def __str__(self) -> str:
        return f"{self.step_id} round {self.round} [{self.status}]"


class UnitTelemetry(models.Model):
    """Live telemetry of a fan-out item's or a compensation's attempts (``ctx.progress``,
    ``ctx.summary``, ``ctx.log``), written fenced by the unit's lease as a step's is.
    Log frames are kept on the row (``log``, the newest ``FRAMES_PER_UNIT``), numbered
    by ``frames_written``."""

    progress_done = models.FloatField(null=True, blank=True)
    progress_total = models.FloatField(null=True, blank=True)
    progress_message = models.CharField(max_length=500, blank=True, default="")
    progress_at = models.DateTimeField(null=True, blank=True)
    summary = models.JSONField(default=dict, blank=True)
    summary_version = models.PositiveIntegerField(default=0)
    log = models.JSONField(default=list, blank=True)
    frames_written = models.PositiveBigIntegerField(default=0)
    frames_dropped = models.PositiveBigIntegerField(default=0)

    class Meta:
        abstract = True


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
            models.Index(
                fields=["updated_at"],
                condition=Q(status=StepStatus.READY),
                name="workflows_item_ready",
            ),
            models.Index(
                fields=["queue", "requires", "-priority", "updated_at"],
                condition=Q(status=StepStatus.READY),
                name="workflows_item_ready_route",
            ),
            models.Index(
                fields=["held_on", "-priority", "updated_at"],
                condition=Q(status=StepStatus.READY),
                name="workflows_item_held",
            ),
            models.Index(
                fields=["lease_expires_at"],
                condition=Q(status=StepStatus.RUNNING),
                name="workflows_item_lease",
            ),
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
            models.Index(
                fields=["id"], condition=Q(published=False), name="workflows_event_unpublished"
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
    """

    name = models.CharField(max_length=200, primary_key=True)
    position_xid = models.BigIntegerField(default=0)
    position_id = models.BigIntegerField(default=0)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    acked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        permissions = [
            ("manage_consumers", "Can create and delete event consumers"),
        ]

    def __str__(self) -> str:
        return self.name


class Flow(models.Model):
    """A graph of runs that the application builds while it runs (``create_flow``).

    Its members are runs joined by dependency edges; ``revision`` counts the changes to
    the graph (a member, an edge, a join), so a writer can stage an edge against the
    graph it last read and be refused when it moved (compare-and-set).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    # NULL, not "", for "no key": the unique constraint must ignore keyless flows.
    key = models.CharField(max_length=255, null=True, blank=True, unique=True)
    status = models.CharField(max_length=16, choices=FlowStatus.choices, default=FlowStatus.OPEN)
    revision = models.PositiveIntegerField(default=0)
    # Once ended: the members that did not complete, by status.
    summary = models.JSONField(default=dict, blank=True)
    version = models.PositiveIntegerField(default=1)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Set by cancel_flow in the transaction that closes the flow: what it does to the
    # members ("" until cancelled), why, and who asked (None: code, or a user since deleted).
    cancel_policy = models.CharField(max_length=16, blank=True, default="")
    cancel_reason = models.TextField(blank=True, default="")
    cancelled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # When every member the policy covers had been cancelled (NULL until then: the
    # recovery scanner finishes a cancellation a dead process left half done).
    members_cancelled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["status", "created_at"], name="workflows_flow_status"),
            models.Index(
                fields=["updated_at"],
                name="workflows_flow_cancelling",
                condition=models.Q(status="cancelled", members_cancelled_at__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"flow {self.name} [{self.status}] {self.id}"


class FlowMember(models.Model):
    """One run of a flow, under a name unique in the flow, and when it may start."""

    flow = models.ForeignKey(Flow, on_delete=models.CASCADE, related_name="members")
    name = models.CharField(max_length=200)
    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="flow_member")
    join = models.CharField(max_length=16, choices=JoinKind.choices, default=JoinKind.ALL)
    # k of an ``at_least`` join: at least k upstream members completed.
    join_count = models.PositiveIntegerField(null=True, blank=True)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["flow", "name"], name="workflows_flowmember_name"),
        ]

    def __str__(self) -> str:
        return f"{self.name} of flow {self.flow_id}"


class FlowEdge(models.Model):
    """``downstream`` waits for ``upstream`` (under the downstream's join)."""

    flow = models.ForeignKey(Flow, on_delete=models.CASCADE, related_name="edges")
    upstream = models.ForeignKey(
        FlowMember, on_delete=models.CASCADE, related_name="downstream_edges"
    )
    downstream = models.ForeignKey(
        FlowMember, on_delete=models.CASCADE, related_name="upstream_edges"
    )
    # The flow's revision this edge made.
    revision = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["upstream", "downstream"], name="workflows_flowedge_unique"
            ),
        ]
        indexes = [
            models.Index(fields=["downstream", "upstream"], name="workflows_flowedge_down"),
        ]

    def __str__(self) -> str:
        return f"{self.upstream_id} → {self.downstream_id}"


class ConcurrencySlot(models.Model):
    """One of the places under a concurrency limit: ``max_concurrent`` slots per key.

    A slot is taken by a compare-and-set in the claim transaction and is free when its
    holder is empty or no longer holds it: a step or item no longer ``running`` at
    ``holder_attempt``, or a run that has ended. So a crashed worker's slot comes back
    as soon as its lease is reclaimed, with no release to forget.
    """

    key = models.CharField(max_length=300)
    slot = models.PositiveIntegerField()
    # "step", "item" (holder_id, holder_attempt) or "run" (holder_run); "" when free.
    holder_kind = models.CharField(max_length=16, blank=True, default="")
    holder_id = models.BigIntegerField(null=True, blank=True)
    holder_attempt = models.PositiveIntegerField(default=0)
    holder_run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    acquired_at = models.DateTimeField(null=True, blank=True)
    version = models.PositiveIntegerField(default=1)

    class Meta:
        ordering = ["key", "slot"]
        constraints = [
            models.UniqueConstraint(fields=["key", "slot"], name="workflows_slot_unique")
        ]

    def __str__(self) -> str:
        return f"slot {self.slot} of {self.key}"


class RateBucket(models.Model):
    """A rate limit's recent starts, shared by every worker: one row per limited key.

    ``starts`` holds the moments (seconds since the epoch, database clock) of the starts
    within the last period, oldest first: a start is allowed while fewer than the
    limit's count lie within one period of now, so no window of one period ever holds
    more starts than the limit allows, and a burst of up to the count passes at once.
    """

    key = models.CharField(max_length=300, unique=True)
    starts = models.JSONField(default=list)
    version = models.PositiveIntegerField(default=1)

    def __str__(self) -> str:
        return f"rate {self.key}"


class BudgetCounter(models.Model):
    """Usage counted against one declared budget, for a workflow or one business key.

    ``limit`` starts as the declared limit and is what an operator raises; ``used``
    goes back to zero when the period (if any) ends or an operator resets it.
    """

    workflow_name = models.CharField(max_length=200)
    dimension = models.CharField(max_length=60)
    # The business key it counts for; "" for a budget per workflow.
    scope_key = models.CharField(max_length=255, blank=True, default="")
    limit = models.DecimalField(max_digits=24, decimal_places=6)
    used = models.DecimalField(max_digits=24, decimal_places=6, default=0)
    period_started_at = models.DateTimeField(null=True, blank=True)
    version = models.PositiveIntegerField(default=1)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["workflow_name", "dimension", "scope_key"]
        verbose_name = "usage budget"
        constraints = [
            models.UniqueConstraint(
                fields=["workflow_name", "dimension", "scope_key"],
                name="workflows_budget_unique",
            )
        ]

    def __str__(self) -> str:
        scope = f" [{self.scope_key}]" if self.scope_key else ""
        return f"{self.workflow_name} {self.dimension}{scope}: {self.used}/{self.limit}"


class UsageReport(models.Model):
    """One ``ctx.report_usage(dimension, amount)`` call, kept for audit."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="usage_reports")
    step = models.ForeignKey(
        Step, null=True, blank=True, on_delete=models.CASCADE, related_name="usage_reports"
    )
    dimension = models.CharField(max_length=60)
    amount = models.DecimalField(max_digits=24, decimal_places=6)
    attempt = models.PositiveIntegerField(default=0)
    reported_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["reported_at", "id"]

    def __str__(self) -> str:
        return f"{self.dimension} {self.amount} for run {self.run_id}"


class WorkerPresence(models.Model):
    """A running worker command: the queues it serves and its capabilities.

    Written when it starts and every few seconds while it runs (``seen_at``), so
    ``explain`` can tell work that waits for a worker of its queue from work that waits
    for a free one.
    """

    name = models.CharField(max_length=200, unique=True)
    queues = models.JSONField(default=list)
    capabilities = models.JSONField(default=list)
    started_at = models.DateTimeField()
    seen_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "worker"

    def __str__(self) -> str:
        return f"worker {self.name}"
