"""Runs: one execution of a workflow definition each, pinned to its version, and the
host's object a run may be about (``subject_of``)."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.contrib.contenttypes.fields import GenericForeignKey
from django.contrib.contenttypes.models import ContentType
from django.db import models
from django.db.models import Q

from workflows.status import RUN_ATTENTION_FAILED, RUN_FINAL, RunStatus, RunTrigger

# A run that ended in failure and was not terminated on purpose: failed, or terminated
# while failing (the termination keeps the failure as its ``cause``) or with an error of
# its own. Spelled out so that an error without a code is a failure rather than unknown
# (NULL). The attention class ``failed`` (queries/runs.py) is this, less dismissed runs;
# on PostgreSQL the partial index ``workflows_run_failing`` (migration 0038, keyed by
# ``dismissed_at``; not on SQLite, whose lists of failed runs it would have served
# badly) has this condition, so that PostgreSQL sees the class's query implies it and
# counts the class from the index alone (1.3 ms at a million runs).
FAILING = Q(status=RunStatus.FAILED) | (
    Q(status=RunStatus.TERMINATED, error__isnull=False)
    & (Q(error__code__isnull=True) | ~Q(error__code="terminated") | Q(error__has_key="cause"))
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
    # The run's variables: a JSON object that steps change with ``ctx.set_variables``
    # (workflows.engine.variables), bounded by ``WORKFLOWS["MAX_VARIABLES_BYTES"]``.
    variables = models.JSONField(default=dict, blank=True)
    # The run's tags (``start_run(tags=...)``, ``ctx.set_tags``): a dict of short keys to
    # short strings, what is shown and returned. A filter by tag reads ``RunTag``, one row
    # a tag written in the same transaction (workflows.engine.tags).
    tags = models.JSONField(default=dict, blank=True)
    # NULL, not "", for "no key": the unique constraint must ignore keyless runs.
    idempotency_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    input_hash = models.CharField(max_length=64, blank=True, default="")
    business_key = models.CharField(max_length=255, blank=True, default="")
    # Copied from the workflow's ``unique_business_key`` at the start: the partial unique
    # index below can only name columns, and a redeploy must not change a live run's rule.
    unique_business_key = models.BooleanField(default=False)
    # What a person reads in the lists (``start_run(title=...)``); "" shows the workflow.
    title = models.CharField(max_length=200, blank=True, default="")
    # The surface that started the run; its user, if any, is ``created_by``.
    trigger = models.CharField(max_length=16, choices=RunTrigger.choices, default=RunTrigger.CODE)
    # An ended run an operator has seen to (``dismiss_run``): left out of the default
    # lists and the attention views. NULL: not dismissed.
    dismissed_at = models.DateTimeField(null=True, blank=True)
    dismissed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
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
    # The schedule that started this run and the slot it started for (a trigger's: the
    # instant of the trigger), if any. SET_NULL: a deleted schedule leaves its runs.
    schedule = models.ForeignKey(
        "Schedule",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="runs",
        db_index=False,
    )
    scheduled_for = models.DateTimeField(null=True, blank=True)
    # The W3C traceparent of the span that started the run (workflows.tracing): each
    # attempt's span is its child, in whatever process. "" when the start was not traced.
    traceparent = models.CharField(max_length=128, blank=True, default="")
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
    # Not a column: whether budgets were set at run time on the workflow, read with the
    # engine's lock of the run; unknown (so asked) on a run read any other way.
    has_runtime_budgets: bool = True

    class Meta:
        ordering = ["-created_at"]
        # Viewing runs is Django's own ``view_run``; starting and operating are separate,
        # and so is reading the metrics (``workflows.metrics``), which staff may need alone.
        permissions = [
            ("start_run", "Can start runs of registered workflows"),
            ("operate_run", "Can operate runs: cancel, terminate, pause, resume, retry, rerun"),
            ("view_metrics", "Can read the Prometheus metrics of all runs"),
            (
                "do_external_work",
                "Can claim, heartbeat, complete and fail external steps (/api/work/)",
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["workflow_name", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="workflows_run_unique_idempotency_key",
            ),
            # Of a workflow with ``unique_business_key``, one live run per key: the index,
            # not a read before the write, decides between two racing starts or setters.
            # A run ending leaves the index, so its key is free again.
            models.UniqueConstraint(
                fields=["workflow_name", "business_key"],
                condition=Q(unique_business_key=True)
                & ~Q(business_key="")
                & ~Q(status__in=sorted(RUN_FINAL)),
                name="workflows_run_unique_live_business_key",
            ),
        ]
        indexes = [
            # On PostgreSQL ``dismissed_at`` rides along (``INCLUDE``, made by migration
            # 0036 there alone: SQLite has none, and Django warns of one declared for
            # it): the runs list leaves dismissed runs out, and its bounded count of a
            # status (10,001 failed runs) is then read from the index alone, not 10,001
            # rows of the table. The same one index a status change writes, an entry a
            # little wider.
            models.Index(
                fields=["status", "created_at"],
                name="workflows_run_status",
            ),
            models.Index(
                fields=["workflow_name", "workflow_version", "created_at"],
                name="workflows_run_workflow",
            ),
            models.Index(fields=["created_at"], name="workflows_run_created"),
            # The metrics' runs by workflow and status (a count of every run): read from
            # the index alone. The dashboard counts live and recent runs instead.
            models.Index(fields=["workflow_name", "status"], name="workflows_run_by_workflow"),
            # The runs list sorted by workflow, either way (its ties follow the sort's
            # direction): read in index order, forwards or backwards, with no sort. No
            # transition changes these columns: the index is written at the insert only.
            models.Index(
                fields=["workflow_name", "created_at", "id"], name="workflows_run_wf_sort"
            ),
            # The dashboard's runs finished per hour over the last day.
            models.Index(fields=["finished_at"], name="workflows_run_finished"),
            # A business key or its start (the runs list's search): on PostgreSQL with
            # the pattern operator class, which answers ``LIKE 'key%'`` as a range of the
            # index whatever the database's collation (and ``=`` as before).
            models.Index(
                fields=["business_key"],
                name="workflows_run_business_key",
                opclasses=["varchar_pattern_ops"],
            ),
            # The runs list sorted by start, either way (ties in the sort's direction, as
            # the workflow sort's): read in index order, with no sort of every run.
            models.Index(fields=["started_at", "created_at", "id"], name="workflows_run_started"),
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
            # A step's child runs, newest first (the waits page's and the run page's
            # "child" of a waiting step): the foreign key's own index gives the step's
            # runs but not their order, and SQLite then walked every run by creation
            # time for each waiting step (seconds a page at a million runs).
            models.Index(
                fields=["parent_step", "created_at"],
                condition=Q(parent_step__isnull=False),
                name="workflows_run_step_children",
            ),
            # Runs a schedule started only: a schedule's runs, newest slot first, and its
            # live runs when a slot is decided.
            models.Index(
                fields=["schedule", "scheduled_for"],
                condition=Q(schedule__isnull=False),
                name="workflows_run_schedule",
            ),
            # The live runs of schedules: what a slot's overlap policy looks at, read
            # without walking a schedule's years of ended runs.
            models.Index(
                fields=["schedule"],
                condition=Q(schedule__isnull=False) & ~Q(status__in=sorted(RUN_FINAL)),
                name="workflows_run_schedule_live",
            ),
            # Runs with a deadline only: the runs list's deadline filters; on PostgreSQL
            # with ``dismissed_at`` (``INCLUDE``, migration 0036) for the list's bounded
            # count, read from the index alone.
            models.Index(
                fields=["deadline"],
                condition=Q(deadline__isnull=False),
                name="workflows_run_deadline",
            ),
            # Live runs with a deadline only: "near their deadline" (console and API),
            # whose rows are the few live ones among every run that ever had a deadline.
            models.Index(
                fields=["deadline"],
                condition=Q(deadline__isnull=False) & ~Q(status__in=sorted(RUN_FINAL)),
                name="workflows_run_live_deadline",
            ),
            # Runs with a deadline in creation order: a page of the "passed" and "has a
            # deadline" filters reads them newest first and stops after the page, where
            # the index by deadline gave them all to be sorted; with the deadline and
            # the dismissal, the lists' bounded counts read the index alone. Written at
            # the insert, and again if the run is dismissed or its deadline changes: no
            # transition changes these columns.
            models.Index(
                fields=["created_at", "id", "deadline", "dismissed_at"],
                condition=Q(deadline__isnull=False),
                name="workflows_run_deadline_created",
            ),
            # The runs of the "failed" attention class not dismissed, in creation order:
            # that filter's page (console and API) reads them newest first and stops.
            # An entry is written when a run fails or is terminated and removed when it
            # is dismissed; a run that does neither never has one.
            models.Index(
                fields=["created_at", "id"],
                condition=Q(status__in=sorted(RUN_ATTENTION_FAILED), dismissed_at__isnull=True),
                name="workflows_run_failed_created",
            ),
            # Dismissed runs only: the "dismissed" filter's rows. The default lists' "not
            # dismissed" is most runs, read in creation order with the other indexes.
            models.Index(
                fields=["dismissed_at"],
                condition=Q(dismissed_at__isnull=False),
                name="workflows_run_dismissed",
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


class RunTag(models.Model):
    """One tag of a run, as a row: what a filter by tag reads (``Run.tags`` is the dict
    shown and returned; both are written in one transaction by workflows.engine.tags).

    ``created_at`` is the run's, copied when the row is written (nothing changes a run's
    ``created_at``): a filter by tag joins on it too, so that its index (key, value,
    created_at, run) hands the newest runs of a tag out in the lists' order, however
    rare or common the tag (docs/architecture.md, "Tags"). A run without tags has no
    rows.
    """

    # No index of its own: the unique (run, key) constraint's index serves a run's rows.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="tag_rows", db_index=False)
    key = models.CharField(max_length=64)
    value = models.CharField(max_length=255)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "key"], name="workflows_runtag_unique_key"),
        ]
        indexes = [
            models.Index(
                fields=["key", "value", "created_at", "run"], name="workflows_runtag_lookup"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.key}={self.value}"
