"""The columns every leased unit shares (steps, fan-out items, compensations), as abstract
models: the lease and its fencing, and what the running attempts report; and the
indexes the claims of a routed unit read."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from workflows.definitions.limits import EXTERNAL_MARK
from workflows.status import FailureClass, StepStatus


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


# The units of external steps (``Task(external=True)``): their route's mark leads
# ``requires``. No process of the project runs them, so the in-process runner and the
# scanner that re-sends unclaimed ready work leave them out; outside workers claim them.
EXTERNAL_UNITS = Q(requires__startswith=EXTERNAL_MARK)


def claim_indexes(prefix: str) -> list[models.Index]:
    """The partial indexes the claims and scans of a routed unit (a step, a fan-out item)
    read, named ``workflows_<prefix>_...``: ready units by when they last changed (the
    scanner re-dispatching ready work nobody claimed); a worker's claim, the best ready
    unit of its route; the units a freed concurrency slot or a raised budget lets start;
    running units by lease expiry (the scanner reclaiming expired leases)."""
    ready = Q(status=StepStatus.READY)
    return [
        models.Index(fields=["updated_at"], condition=ready, name=f"workflows_{prefix}_ready"),
        models.Index(
            fields=["queue", "requires", "-priority", "updated_at"],
            condition=ready,
            name=f"workflows_{prefix}_ready_route",
        ),
        models.Index(
            fields=["held_on", "-priority", "updated_at"],
            condition=ready,
            name=f"workflows_{prefix}_held",
        ),
        models.Index(
            fields=["lease_expires_at"],
            condition=Q(status=StepStatus.RUNNING),
            name=f"workflows_{prefix}_lease",
        ),
    ]


class ReportedProgress(models.Model):
    """What a handler's attempts report with ``ctx.progress`` and ``ctx.summary``: live on
    a step, an item or a compensation (written fenced by its lease), and as it was when
    a step's round ended (``StepRound``).

    Progress: the last value wins. The summary is a document changed by JSON merge
    patches (RFC 7386); ``summary_version`` counts the patches applied.
    """

    progress_done = models.FloatField(null=True, blank=True)
    progress_total = models.FloatField(null=True, blank=True)
    progress_message = models.CharField(max_length=500, blank=True, default="")
    progress_at = models.DateTimeField(null=True, blank=True)
    summary = models.JSONField(default=dict, blank=True)
    summary_version = models.PositiveIntegerField(default=0)

    class Meta:
        abstract = True


class UnitTelemetry(ReportedProgress):
    """Live telemetry of a fan-out item's or a compensation's attempts (``ctx.progress``,
    ``ctx.summary``, ``ctx.log``), written fenced by the unit's lease as a step's is.
    Log frames are kept on the row (``log``, the newest ``FRAMES_PER_UNIT``), numbered
    by ``frames_written``."""

    log = models.JSONField(default=list, blank=True)
    frames_written = models.PositiveBigIntegerField(default=0)
    frames_dropped = models.PositiveBigIntegerField(default=0)

    class Meta:
        abstract = True
