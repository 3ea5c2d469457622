"""Flows: graphs of runs that the application builds while it runs, their members and
the dependency edges between them."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from workflows.models.runs import Run
from workflows.status import FlowStatus, JoinKind


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
    # The W3C traceparent of the span that created the flow: its members' runs start
    # under it, so a flow is one trace (workflows.tracing). "" when not traced.
    traceparent = models.CharField(max_length=128, blank=True, default="")
    # The tags its members start with unless given their own (``create_flow(tags=...)``).
    tags = models.JSONField(default=dict, blank=True)
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
