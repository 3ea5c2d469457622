"""The state behind a workflow's limits and routes (``workflows.definitions.limits``):
concurrency slots, rate buckets, budget counters and the usage reported against them,
and the workers present to serve each queue."""

from __future__ import annotations

from django.db import models

from workflows.models.runs import Run
from workflows.models.steps import Step


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
    # How many reports took ``used`` from below ``limit`` to or past it, and the last time.
    breaches = models.PositiveIntegerField(default=0)
    last_breached_at = models.DateTimeField(null=True, blank=True)
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


class RuntimeBudget(models.Model):
    """A budget an operator created or changed without a deploy (``create_budget``).

    Named like a declared one by workflow, dimension and ``per``; where both name the
    same budget, this one wins (``docs/guide/budgets.md``). Its counters are the same
    ``BudgetCounter`` rows a declared budget's would be.
    """

    workflow_name = models.CharField(max_length=200)
    dimension = models.CharField(max_length=60)
    per = models.CharField(max_length=16)  # "workflow" or "business_key"
    limit = models.DecimalField(max_digits=24, decimal_places=6)
    period = models.DurationField(null=True, blank=True)
    on_exhausted = models.CharField(max_length=8)  # "hold" or "fail"
    # Who last created or changed it ("" for trusted code).
    changed_by = models.CharField(max_length=150, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    version = models.PositiveIntegerField(default=1)

    class Meta:
        ordering = ["workflow_name", "dimension", "per"]
        verbose_name = "budget set at run time"
        constraints = [
            models.UniqueConstraint(
                fields=["workflow_name", "dimension", "per"],
                name="workflows_runtime_budget_unique",
            )
        ]

    def __str__(self) -> str:
        return f"{self.workflow_name} {self.dimension} per {self.per}: {self.limit}"


class UsageReport(models.Model):
    """One ``ctx.report_usage(dimension, amount)`` call, or an operator's
    ``report_usage`` (no run: its workflow, business key and who), kept for audit."""

    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.CASCADE, related_name="usage_reports"
    )
    # An operator's report: the workflow and business key it counts for, and who made it.
    workflow_name = models.CharField(max_length=200, blank=True, default="")
    scope_key = models.CharField(max_length=255, blank=True, default="")
    reported_by = models.CharField(max_length=150, blank=True, default="")
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
        what = f"run {self.run_id}" if self.run_id else f"workflow {self.workflow_name}"
        return f"{self.dimension} {self.amount} for {what}"


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
