"""Steps: the nodes of a run's graph, and what each keeps of its past: the iterations a
loop ran (``StepIteration``), the ended rounds (``StepRound``) and its log (``Frame``)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Coalesce

from workflows.models.leased import LeasedWork, ReportedProgress, claim_indexes
from workflows.models.runs import Run
from workflows.status import (
    Decision,
    DecisionVia,
    FailureClass,
    NodeKind,
    RoundAttempts,
    StepStatus,
    attempt_in_round,
)


class GateDecision(models.Model):
    """A gate's decision: what was decided, how, by whom and when, with the decider's
    feedback and selections. Held by the step, and kept with each of its finished
    iterations (``StepIteration``)."""

    decision = models.CharField(max_length=16, choices=Decision.choices, blank=True, default="")
    # How the decision was made: by a decider, the timeout, or a skip (within the
    # gate's rule, or overriding it).
    decided_via = models.CharField(
        max_length=16, choices=DecisionVia.choices, blank=True, default=""
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    feedback = models.TextField(blank=True, default="")
    selections = models.JSONField(default=list, blank=True)

    class Meta:
        abstract = True


class Step(LeasedWork, ReportedProgress, GateDecision):
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
    # The address the decision came from, as the caller passed it (None: not given).
    decided_from = models.GenericIPAddressField(null=True, blank=True)
    # Who said they are deciding this gate: others may not decide it without the
    # ``workflows.override_gate_claim`` permission.
    claimed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    claimed_at = models.DateTimeField(null=True, blank=True)
    # Wait for signal: the signal name this step consumes.
    signal_name = models.CharField(max_length=200, blank=True, default="")
    # ``Await``: what the step's handler awaits while the step waits (``{"signals":
    # [...], "until": iso or null, "since": iso}``; null when it awaits nothing), and
    # how the last await ended (``{"signal": name, "payload": ...}`` or ``{"timed_out":
    # true}``), which the next attempt's handler reads as ``ctx.resumed``.
    awaiting = models.JSONField(null=True, blank=True)
    resumed = models.JSONField(null=True, blank=True)
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
            *claim_indexes("step"),
            # The approvals list: waiting gates, oldest first, among every step ever run.
            models.Index(
                fields=["started_at", "id"],
                condition=Q(status=StepStatus.WAITING, kind=NodeKind.GATE),
                name="workflows_step_waiting_gate",
            ),
            # The API's gates inbox: waiting gates in the order they started waiting
            # (``waiting_since``, the start or else the creation), read in index order,
            # a page at a time, rather than every waiting gate sorted.
            models.Index(
                Coalesce("started_at", "created_at"),
                F("id"),
                condition=Q(status=StepStatus.WAITING, kind=NodeKind.GATE),
                name="workflows_step_gate_since",
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


class StepIteration(GateDecision):
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
        indexes = [
            # A run's rows found by the run: the foreign key's own check when a run is
            # deleted (retention) reads it, for every run deleted, on both databases.
            models.Index(fields=["run"], name="workflows_iteration_run"),
        ]

    def __str__(self) -> str:
        return f"{self.step_id} iteration {self.iteration} [{self.status}]"


class StepRound(ReportedProgress):
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
        indexes = [
            # As StepIteration's: what a run's deletion checks its foreign key through.
            models.Index(fields=["run"], name="workflows_round_run"),
        ]

    def __str__(self) -> str:
        return f"{self.step_id} round {self.round} [{self.status}]"
