"""Who may call each write verb: one table, which every surface asks.

Each verb is declared once in :data:`VERBS`, with the permission it needs
(:mod:`workflows.permissions`) and who is held to it:

- a user signed in to a surface (an admin page or action, an API permission class) must
  hold the verb's permission before the verb is offered or run: :meth:`Access.allows`;
- a user named by trusted code (a Python call's ``user=``, a command's ``--user``) is
  held to it only where the verb says ``named=True`` (changing a budget); elsewhere the
  user is the actor recorded in the history, because code and the command line already
  act with the whole database's authority: :meth:`Access.check_named`. No user at all
  (``user=None``) is trusted code everywhere;
- the gate verbs name no permission: the gate's own rule decides
  (:mod:`workflows.approvals`), for every caller, and the gate services check it
  (:mod:`workflows.services.gates`), as they check ``OVERRIDE_GATE_CLAIM`` and
  ``OVERRIDE_GATE_RULE``. Skipping a gate is an operator verb that is also a decision,
  so it needs both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.core.exceptions import PermissionDenied

from workflows.engine.guards import RUN_VERBS, STEP_VERBS
from workflows.permissions import (
    ADD_SCHEDULE,
    CHANGE_SCHEDULE,
    CHANGE_WEBHOOKENDPOINT,
    DELETE_SCHEDULE,
    DO_EXTERNAL_WORK,
    MANAGE_CONSUMERS,
    OPERATE_RUN,
    START_RUN,
    VIEW_RUN,
    VIEW_SCHEDULE,
)

if TYPE_CHECKING:
    from workflows.permissions import AnyUser

__all__ = [
    "ADD_SCHEDULES",
    "BUILD_FLOWS",
    "CHANGE_BUDGETS",
    "CHANGE_SCHEDULES",
    "DECIDE_GATES",
    "DELETE_SCHEDULES",
    "EXTERNAL_WORK",
    "MANAGE_EVENT_CONSUMERS",
    "OPERATE_RUNS",
    "REPLAY_DELIVERIES",
    "START_RUNS",
    "START_SCHEDULED_RUNS",
    "VERBS",
    "VIEW_RUNS",
    "VIEW_SCHEDULES",
    "Access",
]


@dataclass(frozen=True)
class Access:
    """What a class of verbs needs: a permission (``None``: the gate's own rule), and
    whether a user named by code or ``--user`` is held to it too."""

    doing: str
    permission: str | None
    named: bool
    # Why these verbs need the permission, when their name does not say it (a flow's
    # verbs need ``start_run`` because its members are runs): the refusal says so.
    because: str = ""
    # A permission that allows these verbs as well as ``permission`` does (reading
    # schedules: viewing runs, or Django's view permission on schedules).
    alternative: str | None = None
    # A permission needed besides ``permission`` (triggering a schedule changes it
    # and starts a run).
    also: str | None = None

    @property
    def refusal(self) -> str:
        """The message of a refusal: ``"operating runs needs the permission ..."``; with
        a reason, a sentence naming what is refused, why, and the permission."""
        if self.alternative:
            return f"{self.doing} needs the permission {self.permission} or {self.alternative}"
        if self.also:
            return f"{self.doing} needs the permissions {self.permission} and {self.also}"
        if self.because:
            return (
                f"{self.doing[:1].upper()}{self.doing[1:]} is refused: {self.because}, so "
                f"it needs the permission {self.permission}."
            )
        return f"{self.doing} needs the permission {self.permission}"

    def allows(self, user: AnyUser | None) -> bool:
        """Whether ``user``, signed in to a surface, may use these verbs at all (for the
        gate verbs, whether they are signed in: the gate's rule decides per gate)."""
        if not (user is not None and user.is_authenticated):
            return False
        if self.permission is None:
            return True
        held = user.has_perm(self.permission) or bool(
            self.alternative and user.has_perm(self.alternative)
        )
        return held and (self.also is None or user.has_perm(self.also))

    def check_named(self, user: AnyUser | None) -> None:
        """Refuse a user named by code or ``--user`` who lacks the permission, where
        these verbs hold named users to it; ``None`` is trusted code."""
        if user is None or not self.named or self.permission is None:
            return
        if not self.allows(user):
            raise PermissionDenied(self.refusal)


# Reading is no verb, but the API's permission classes ask it the same way.
VIEW_RUNS = Access("viewing runs", VIEW_RUN, named=False)
OPERATE_RUNS = Access("operating runs", OPERATE_RUN, named=False)
START_RUNS = Access("starting runs", START_RUN, named=False)
BUILD_FLOWS = Access(
    "creating or changing a flow",
    START_RUN,
    named=False,
    because="a flow starts its members as runs",
)
# A budget is shared by every run of its workflow: raising one releases work of
# thousands of runs, so whoever code or a command names must hold the permission too.
CHANGE_BUDGETS = Access("changing a budget", OPERATE_RUN, named=True)
DECIDE_GATES = Access("deciding a gate", None, named=True)
# The permission that manages endpoints (where workers send data) also replays deliveries.
REPLAY_DELIVERIES = Access("replaying webhook deliveries", CHANGE_WEBHOOKENDPOINT, named=False)
# A consumer is a row every reader of the console and every scrape pays for: only those
# allowed to manage consumers create one (reading never does) or delete one, a user
# named by code or ``--user`` included.
MANAGE_EVENT_CONSUMERS = Access("managing event consumers", MANAGE_CONSUMERS, named=True)
# Schedules: Django's model permissions, so a team grants them as it grants any other;
# a verb that starts a run now (trigger, backfill) needs starting runs besides.
VIEW_SCHEDULES = Access("viewing schedules", VIEW_RUN, named=False, alternative=VIEW_SCHEDULE)
ADD_SCHEDULES = Access("creating schedules", ADD_SCHEDULE, named=False)
CHANGE_SCHEDULES = Access("changing schedules", CHANGE_SCHEDULE, named=False)
DELETE_SCHEDULES = Access("deleting schedules", DELETE_SCHEDULE, named=False)
START_SCHEDULED_RUNS = Access(
    "triggering or backfilling schedules", CHANGE_SCHEDULE, named=False, also=START_RUN
)

# The verbs of a worker outside the process over ``/api/work/``: a permission of their
# own, so that a service account that does work can do nothing else.
EXTERNAL_WORK = Access("doing external work", DO_EXTERNAL_WORK, named=False)

VERBS: dict[str, Access] = {
    **{name: OPERATE_RUNS for name in RUN_VERBS},
    **{name: OPERATE_RUNS for name in STEP_VERBS},
    "signal": OPERATE_RUNS,
    "bulk": OPERATE_RUNS,
    # Failing stuck work has no page of its own; the bulk recovery and Python call it.
    "fail_step": OPERATE_RUNS,
    "start": START_RUNS,
    # Building a flow starts runs (its members); cancelling it operates them.
    "create_flow": BUILD_FLOWS,
    "add_to_flow": BUILD_FLOWS,
    "add_dependency": BUILD_FLOWS,
    "set_join": BUILD_FLOWS,
    "seal_flow": BUILD_FLOWS,
    "cancel_flow": OPERATE_RUNS,
    "create_budget": CHANGE_BUDGETS,
    "raise_budget": CHANGE_BUDGETS,
    "reset_budget": CHANGE_BUDGETS,
    # Usage an operator reports counts against a shared budget and may hold its work.
    "report_usage": CHANGE_BUDGETS,
    "approve": DECIDE_GATES,
    "reject": DECIDE_GATES,
    "claim": DECIDE_GATES,
    "release": DECIDE_GATES,
    "replay": REPLAY_DELIVERIES,
    "create_consumer": MANAGE_EVENT_CONSUMERS,
    "delete_consumer": MANAGE_EVENT_CONSUMERS,
    "create_schedule": ADD_SCHEDULES,
    "update_schedule": CHANGE_SCHEDULES,
    "pause_schedule": CHANGE_SCHEDULES,
    "unpause_schedule": CHANGE_SCHEDULES,
    "delete_schedule": DELETE_SCHEDULES,
    "trigger_schedule": START_SCHEDULED_RUNS,
    "backfill_schedule": START_SCHEDULED_RUNS,
    "claim_external": EXTERNAL_WORK,
    "heartbeat_external": EXTERNAL_WORK,
    "complete_external": EXTERNAL_WORK,
    "fail_external": EXTERNAL_WORK,
    "log_external": EXTERNAL_WORK,
}
"""Every write verb a surface offers, and what it needs. The run and step verbs are
those of :mod:`workflows.engine.guards`, so a new verb there is covered here."""
