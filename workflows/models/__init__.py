"""The durable state of workflows: runs, their steps, timers and the event history.

Rows here are written only by ``workflows.engine``; every mutable row carries a
``version`` column that each write compares and increments (compare-and-set), and leased
rows carry ``attempt``, ``lease_owner`` and ``lease_expires_at`` for fencing.

A package, one module per job, as Django apps of this size keep their models; every
model is imported from here (``from workflows.models import Run``), never from its
module. ``runs`` (Run), ``leased`` (the abstract columns of leased work), ``steps``
(Step and its past: iterations, rounds), ``units`` (fan-out items, compensations),
``waits`` (signals, timers), ``history`` (events, log frames, consumers), ``flows``,
``schedules``, ``limits`` (slots, rate buckets, budgets, usage, worker presence) and
``webhooks``
(endpoints, deliveries).
"""

# isort: off
# The modules are loaded in this order so that the models register with the app in the
# order they always had (content types and permissions of a new database are created in
# it): the webhook models first, then the rest as they read.
from workflows.models.webhooks import WebhookDelivery, WebhookEndpoint
from workflows.models.runs import Run, RunQuerySet, RunTag, subject_of
from workflows.models.steps import Step, StepIteration, StepRound
from workflows.models.units import CompensationRecord, FanOutItem
from workflows.models.waits import Signal, Timer
from workflows.models.history import Event, EventConsumer, Frame
from workflows.models.flows import Flow, FlowEdge, FlowMember
from workflows.models.schedules import Schedule, ScheduleOrigin
from workflows.models.limits import (
    BudgetCounter,
    ConcurrencySlot,
    RateBucket,
    RuntimeBudget,
    UsageReport,
    WorkerPresence,
)

# isort: on

__all__ = [
    "BudgetCounter",
    "CompensationRecord",
    "ConcurrencySlot",
    "Event",
    "EventConsumer",
    "FanOutItem",
    "Flow",
    "FlowEdge",
    "FlowMember",
    "Frame",
    "RateBucket",
    "Run",
    "RunQuerySet",
    "RunTag",
    "RuntimeBudget",
    "Schedule",
    "ScheduleOrigin",
    "Signal",
    "Step",
    "StepIteration",
    "StepRound",
    "Timer",
    "UsageReport",
    "WebhookDelivery",
    "WebhookEndpoint",
    "WorkerPresence",
    "subject_of",
]
