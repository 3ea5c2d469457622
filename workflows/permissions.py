"""Every Django permission the app checks, one name each, and what each allows.

The only place the app spells a permission (``tests/unit/test_permissions.py`` fails on
a literal anywhere else). Which verb needs which of them, and who is held to it, is the
table in :mod:`workflows.services.access`; who may decide a gate is the gate's own rule
(:mod:`workflows.approvals`), widened by the two ``OVERRIDE_*`` permissions. Grant them
to groups; docs/guide/security.md is the guide for people giving them out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractUser, AnonymousUser

    AnyUser: TypeAlias = AbstractUser | AnonymousUser
    """Who calls a verb: a signed-in user of the project's user model or the anonymous
    user, as ``request.user`` is typed. The verbs ask it ``has_perm``, its groups and its
    username; ``None`` (where a verb allows it) is the system acting on its own."""

__all__ = [
    "ADD_SCHEDULE",
    "CHANGE_SCHEDULE",
    "CHANGE_WEBHOOKENDPOINT",
    "DELETE_SCHEDULE",
    "DO_EXTERNAL_WORK",
    "EVERY_PERMISSION",
    "MANAGE_CONSUMERS",
    "OPERATE_RUN",
    "OVERRIDE_GATE_CLAIM",
    "OVERRIDE_GATE_RULE",
    "START_RUN",
    "VIEW_FANOUTITEM",
    "VIEW_METRICS",
    "VIEW_RUN",
    "VIEW_SCHEDULE",
    "VIEW_STEP",
]

VIEW_RUN = "workflows.view_run"
"""See definitions, runs, steps, items, history and budgets in the admin and the API,
the operator console's links, and gates of any status over the API."""

START_RUN = "workflows.start_run"
"""Start runs of registered workflows: the admin's start page, ``POST /api/runs/``."""

OPERATE_RUN = "workflows.operate_run"
"""The operator verbs on runs and steps (cancel, terminate, pause, resume, retry,
rerun, priority, retry or skip a step, signals, bulk) and raising or resetting usage
budgets. Skipping a gate also needs the gate's rule or :data:`OVERRIDE_GATE_RULE`."""

DO_EXTERNAL_WORK = "workflows.do_external_work"
"""Do the work of external steps (``Task(external=True)``) over ``/api/work/``: claim,
heartbeat, complete, fail and log. Meant for a service account that does work and
nothing else: it sees no run and starts none."""

VIEW_STEP = "workflows.view_step"
"""See every waiting gate in the approvals inbox, not only those the gate's rule lets
the user decide (Django's view permission on steps)."""

VIEW_FANOUTITEM = "workflows.view_fanoutitem"
"""Follow a fan-out's "Show items" link from the run page to its items (Django's view
permission on fan-out items)."""

VIEW_METRICS = "workflows.view_metrics"
"""Read ``/metrics/`` as a signed-in staff user (a scraper uses ``METRICS_TOKEN``)."""

OVERRIDE_GATE_CLAIM = "workflows.override_gate_claim"
"""Decide, skip or release a gate someone else has claimed (take it over). Granted on
its own; it admits no one the gate's rule does not."""

OVERRIDE_GATE_RULE = "workflows.override_gate_rule"
"""Skip a gate whose own rule does not admit the user, recorded and shown as an
override. Granted on its own, never implied by :data:`OPERATE_RUN`."""

CHANGE_WEBHOOKENDPOINT = "workflows.change_webhookendpoint"
"""Replay webhook deliveries (besides changing endpoints: Django's change permission
on webhook endpoints, which decides where workers send data)."""

MANAGE_CONSUMERS = "workflows.manage_consumers"
"""Create and delete event consumers (``POST``/``DELETE /api/events/consumers/``, the
console's Consumers page, ``workflows_consumers``), and acknowledge for a consumer that
does not exist yet (which creates it). Reading a consumer's events needs only
:data:`VIEW_RUN` and never creates one."""

VIEW_SCHEDULE = "workflows.view_schedule"
"""See schedules without seeing runs (Django's view permission on schedules);
:data:`VIEW_RUN` shows them too."""

ADD_SCHEDULE = "workflows.add_schedule"
"""Create schedules (Django's add permission on schedules)."""

CHANGE_SCHEDULE = "workflows.change_schedule"
"""Change, pause and unpause schedules; with :data:`START_RUN`, trigger and backfill
them (Django's change permission on schedules)."""

DELETE_SCHEDULE = "workflows.delete_schedule"
"""Delete schedules; their runs stay (Django's delete permission on schedules)."""

EVERY_PERMISSION = (
    VIEW_RUN,
    START_RUN,
    OPERATE_RUN,
    VIEW_STEP,
    VIEW_FANOUTITEM,
    VIEW_METRICS,
    DO_EXTERNAL_WORK,
    OVERRIDE_GATE_CLAIM,
    OVERRIDE_GATE_RULE,
    CHANGE_WEBHOOKENDPOINT,
    MANAGE_CONSUMERS,
    VIEW_SCHEDULE,
    ADD_SCHEDULE,
    CHANGE_SCHEDULE,
    DELETE_SCHEDULE,
)
"""Each of the above, for checks that every one of them exists."""
