"""Hooks: Django signals sent after commit, read from the event history.

A transition writes its events in its own transaction, so an event row exists only if
the transition committed. The deliverer reads committed events not yet delivered (the
``published`` flag is the delivery cursor, with a partial index on the undelivered
rows), claims a batch with a compare-and-set, commits the claim, and only then sends
the matching signal for each event in event order. A rolled-back transition left no
event, so it fires no hook; a claimed event belongs to exactly one deliverer, so each
hook fires once per event however many deliverers run.

Delivery is at most once per event: a receiver that raises is logged and counted, the
other receivers and the rest of the batch still get their signals, and the event is not
sent again. See the "Hooks" section of ``docs/architecture.md`` for why.

The sender of a run's hook is its workflow's name; of a flow's hook, the flow's name,
whether the event is about the whole flow (no run) or one of its members; of a run
schedule's hook, the name of the workflow it starts.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from django.db import connections, transaction
from django.db.models import CharField, F
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Coalesce
from django.dispatch import Signal

from workflows.definitions import Gate
from workflows.engine.sql.connection import engine_alias
from workflows.models import Event
from workflows.status import FLOW_FINAL, RUN_FINAL
from workflows.webhooks.outbox import record_deliveries

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

    class _Named(TypedDict):
        """What :func:`claim_events` annotates each event with: the sender of its hook
        (its flow's name for a flow's event, else its run's workflow)."""

        sender: str

    _NamedEvent = WithAnnotations[Event, _Named]

logger = logging.getLogger("workflows.hooks")

run_started = Signal()
"""A run started. ``sender`` is the workflow name; arguments ``run_id`` (UUID),
``step_id`` (None) and ``event`` (the ``run.started`` :class:`~workflows.models.Event`,
whose ``payload`` holds ``workflow``, ``version`` and ``idempotency_key``)."""

run_finished = Signal()
"""A run reached a final status. ``sender`` is the workflow name; arguments ``run_id``,
``step_id`` (None), ``status`` (``completed``, ``failed``, ``compensated``,
``compensation_failed``, ``cancelled`` or ``terminated``) and ``event`` (the
``run.<status>`` event)."""

step_failed = Signal()
"""A step failed for good (its attempts used, a permanent error, a rejected gate).
``sender`` is the workflow name; arguments ``run_id``, ``step_id`` and ``event`` (the
``step.failed`` event; ``payload["code"]`` says why)."""

gate_waiting = Signal()
"""A gate is waiting for a decision. ``sender`` is the workflow name; arguments
``run_id``, ``step_id`` (the gate's step) and ``event`` (the ``step.waiting`` event with
``payload["reason"] == "gate"``)."""

gate_decided = Signal()
"""A gate was approved or rejected, by a person or by its timeout. ``sender`` is the
workflow name; arguments ``run_id``, ``step_id`` and ``event`` (the ``gate.decided``
event; ``payload["decision"]`` and ``payload["by"]``)."""

gate_overridden = Signal()
"""A gate was skipped by someone its rule does not admit, under the separately granted
``workflows.override_gate_rule``: never sent as ``gate_decided``. ``sender`` is the
workflow name; arguments ``run_id``, ``step_id`` and ``event`` (the ``gate.overridden``
event; ``payload["decision"]``, ``payload["by"]`` and ``payload["rule"]``, the
permission and assignees set aside)."""

compensation_failed = Signal()
"""A compensation failed for good, leaving its run ``compensation_failed``. ``sender``
is the workflow name; arguments ``run_id``, ``step_id`` (the compensated step) and
``event`` (the ``compensation.failed`` event; ``payload["error"]``)."""

# The hooks of a flow: ``sender`` is the flow's name; arguments ``flow_id`` (UUID),
# ``run_id`` (the member's run, or None for an event of the whole flow), ``step_id``
# (None) and ``event`` (the ``flow.*`` event; ``payload`` as the history records it).

flow_created = Signal()
"""A flow was created (``create_flow``; not again for the same ``key``). ``event`` is
``flow.created``: ``payload["flow"]``, ``["key"]`` and ``["by"]``; ``run_id`` None."""

flow_member_added = Signal()
"""A member joined a flow. ``run_id`` is its run (``blocked`` while an upstream holds
it); ``event`` is ``flow.member_added``: ``payload["member"]``, ``["workflow"]``,
``["after"]``, ``["join"]``, ``["revision"]`` and ``["by"]``."""

flow_edge_added = Signal()
"""A dependency edge was staged. ``run_id`` is the downstream member's run; ``event`` is
``flow.edge_added``: ``payload["upstream"]``, ``["downstream"]`` and ``["revision"]``."""

flow_join_changed = Signal()
"""A blocked member's join changed (``set_join``). ``run_id`` is the member's run;
``event`` is ``flow.join_changed``: ``payload["member"]``, ``["join"]``, ``["revision"]``."""

flow_member_unblocked = Signal()
"""A blocked member's run started: its join was satisfied after it was added (a member
that nothing held when it was added starts at once and fires none). ``run_id`` is its
run; ``event`` is ``flow.member_unblocked``: ``payload["member"]`` and ``["join"]``."""

flow_dependency_failed = Signal()
"""A blocked member's join can no longer be satisfied: its run is being cancelled with
``dependency_failed`` (its ``run_finished`` follows). ``run_id`` is its run; ``event`` is
``flow.dependency_failed``: ``payload["member"]``, ``["upstream"]`` (the member that
ended otherwise) and ``["upstream_status"]``."""

flow_member_healed = Signal()
"""A member cancelled with ``dependency_failed`` went back to ``blocked``: an upstream
member was retried or rerun (:mod:`workflows.engine.flows.heal`). ``run_id`` is its run;
``event`` is ``flow.member_healed``: ``payload["member"]``, ``["healed_by"]`` (the member
brought back) and ``["by"]``."""

flow_reopened = Signal()
"""A flow that had ended ``failed`` is ``sealed`` again: a member was brought back and
healed its downstream. ``run_id`` None; ``event`` is ``flow.reopened``:
``payload["flow"]``, ``["member"]`` (the member brought back), ``["reopened"]`` (how many
times so far) and ``["by"]``."""

flow_sealed = Signal()
"""A flow was sealed: no more members or edges. ``run_id`` None; ``event`` is
``flow.sealed``: ``payload["flow"]`` and ``["by"]``."""

flow_finished = Signal()
"""A flow ended, as ``run_finished`` for a run. ``run_id`` None; argument ``status``
(``completed``, ``failed`` or ``cancelled``) and ``event`` (the ``flow.<status>`` event:
for an ended sealed flow ``payload["members"]`` and ``["not_completed"]``, member name →
status; for a cancelled one ``["policy"]``, ``["reason"]`` and ``["by"]``)."""

# The hooks of a run schedule: ``sender`` is the schedule's workflow name; arguments
# ``schedule_id`` (None once it is deleted), ``run_id`` (the run a fired slot started,
# else None), ``step_id`` (None) and ``event`` (the ``schedule.*`` event).

schedule_fired = Signal()
"""A slot started its run (or a trigger or backfill did). ``run_id`` is the run;
``event`` is ``schedule.fired``: ``payload["slot"]``, and ``["late_ms"]`` (from the
slot's instant to the start) for a slot the sweeper fired."""

schedule_skipped = Signal()
"""A slot started no run: an earlier run of the schedule had not ended and its overlap
policy is ``skip``. ``event`` is ``schedule.skipped``."""

schedule_buffered = Signal()
"""A slot waits for an earlier run of the schedule to end (overlap ``buffer_*`` or
``*_other``). ``event`` is ``schedule.buffered``."""

schedule_missed = Signal()
"""Slots older than the catch-up window were not started (after downtime). ``event`` is
``schedule.missed``: ``payload["count"]`` and the first and last slot."""

schedule_changed = Signal()
"""A schedule was created, updated, paused, unpaused or deleted. Argument ``change``
(``created``, ``updated``, ``paused``, ``unpaused`` or ``deleted``) and ``event`` (the
``schedule.<change>`` event; ``payload["by"]``, and ``["note"]`` of a pause)."""

SCHEDULE_HOOKS = (
    schedule_fired,
    schedule_skipped,
    schedule_buffered,
    schedule_missed,
    schedule_changed,
)

FLOW_HOOKS = (
    flow_created,
    flow_member_added,
    flow_edge_added,
    flow_join_changed,
    flow_member_unblocked,
    flow_dependency_failed,
    flow_member_healed,
    flow_reopened,
    flow_sealed,
    flow_finished,
)
ALL_HOOKS = (
    run_started,
    run_finished,
    step_failed,
    gate_waiting,
    gate_decided,
    gate_overridden,
    compensation_failed,
    *FLOW_HOOKS,
    *SCHEDULE_HOOKS,
)

# Event type → the hook it fires. ``step.waiting`` fires a hook only for some reasons.
_HOOK_OF_TYPE: dict[str, Signal] = {
    "run.started": run_started,
    **{f"run.{status}": run_finished for status in RUN_FINAL},
    "step.failed": step_failed,
    "gate.decided": gate_decided,
    "gate.overridden": gate_overridden,
    "compensation.failed": compensation_failed,
    "flow.created": flow_created,
    "flow.member_added": flow_member_added,
    "flow.edge_added": flow_edge_added,
    "flow.join_changed": flow_join_changed,
    "flow.member_unblocked": flow_member_unblocked,
    "flow.dependency_failed": flow_dependency_failed,
    "flow.member_healed": flow_member_healed,
    "flow.reopened": flow_reopened,
    "flow.sealed": flow_sealed,
    **{f"flow.{status}": flow_finished for status in FLOW_FINAL},
    "schedule.fired": schedule_fired,
    "schedule.skipped": schedule_skipped,
    "schedule.buffered": schedule_buffered,
    "schedule.missed": schedule_missed,
    **{
        f"schedule.{change}": schedule_changed
        for change in ("created", "updated", "paused", "unpaused", "deleted")
    },
}
_HOOK_OF_WAITING_REASON: dict[str, Signal] = {Gate.kind: gate_waiting}
# Hooks of an end, whose ``status`` argument is what follows the dot of the event type.
_HOOKS_OF_AN_END = (run_finished, flow_finished)
# ... and the hook of a schedule's change, whose ``change`` argument is.
_HOOKS_OF_A_CHANGE = (schedule_changed,)


@dataclass
class Delivery:
    """One pass of :func:`deliver_events`: events claimed, and receivers that raised."""

    claimed: int = 0
    receiver_errors: int = 0


def hook_for(event: Event) -> tuple[Signal, dict[str, Any]] | None:
    """The signal ``event`` fires and its arguments, or None for an event with no hook."""
    if event.type == "step.waiting":
        signal = _HOOK_OF_WAITING_REASON.get(event.payload.get("reason", ""))
    else:
        signal = _HOOK_OF_TYPE.get(event.type)
    if signal is None:
        return None
    arguments: dict[str, Any] = {"run_id": event.run_id, "step_id": event.step_id, "event": event}
    if signal in FLOW_HOOKS:
        arguments["flow_id"] = event.flow_id
    if signal in SCHEDULE_HOOKS:
        arguments["schedule_id"] = event.schedule_id
    if signal in _HOOKS_OF_AN_END:
        arguments["status"] = event.type.partition(".")[2]
    if signal in _HOOKS_OF_A_CHANGE:
        arguments["change"] = event.type.partition(".")[2]
    return signal, arguments


def claim_events(limit: int) -> tuple[int, list[_NamedEvent]]:
    """Mark up to ``limit`` undelivered events delivered, oldest first; return how many,
    and those of them that have a hook some receiver listens to, in order.

    Loses no race and wins none twice: on PostgreSQL the read locks the rows it takes
    and skips those another deliverer holds (``FOR UPDATE SKIP LOCKED``); on SQLite
    ``BEGIN IMMEDIATE`` serialises deliverers, so the loser reads after the winner's
    commit and sees only what is left. The update is guarded by ``published = false``;
    should it ever change fewer rows than were read, the claim rolls back and delivers
    nothing rather than deliver twice. The claimed events' webhook deliveries are
    recorded in the same transaction (:mod:`workflows.webhooks.outbox`).
    """
    alias = engine_alias()
    with transaction.atomic(using=alias):
        ids = list(
            Event.objects.filter(published=False)
            .order_by("id")
            .select_for_update(
                skip_locked=connections[alias].features.has_select_for_update_skip_locked
            )
            .values_list("id", flat=True)[:limit]
        )
        if not ids:
            return 0, []
        claimed = Event.objects.filter(id__in=ids, published=False).update(published=True)
        if claimed != len(ids):
            raise RuntimeError(f"claimed {claimed} of {len(ids)} events; nothing delivered")
        # Webhook deliveries are recorded with the cursor move: once per event, or not
        # at all if this claim rolls back.
        record_deliveries(ids)
    # Read after the claim commits: SQLite's write lock is held no longer than needed.
    # Only the events a receiver waits for are loaded; most events fire no hook.
    hooked = hooked_types()
    if not hooked:
        return len(ids), []
    events = Event.objects.filter(id__in=ids, type__in=hooked)
    # A flow's event names its flow (with or without a run); any other names its run; a
    # schedule's event without a run, the workflow its payload names (every schedule
    # event's does, so it needs no join and outlives a deleted schedule).
    sender = Coalesce(
        F("flow__name"),
        F("run__workflow_name"),
        KeyTextTransform("workflow", "payload"),
        output_field=CharField(),
    )
    return len(ids), list(events.annotate(sender=sender).order_by("id"))


def hooked_types() -> set[str]:
    """The event types whose hook has a receiver connected right now."""
    hooked = {type_ for type_, signal in _HOOK_OF_TYPE.items() if signal.receivers}
    if any(signal.receivers for signal in _HOOK_OF_WAITING_REASON.values()):
        hooked.add("step.waiting")
    return hooked


def send_hook(event: _NamedEvent) -> int:
    """Send ``event``'s hook to every receiver; return how many receivers raised."""
    hook = hook_for(event)
    if hook is None:
        return 0
    signal, arguments = hook
    errors = 0
    for receiver, response in signal.send_robust(sender=event.sender, **arguments):
        if isinstance(response, Exception):
            errors += 1
            logger.error(
                "hook receiver %r failed on event %s (%s of %s %s); not retried",
                receiver,
                event.pk,
                event.type,
                "flow" if event.run_id is None else "run",
                event.flow_id if event.run_id is None else event.run_id,
                exc_info=response,
            )
    return errors


def deliver_events(*, limit: int = 500) -> Delivery:
    """Claim and send undelivered events in batches of ``limit`` until none are left.

    Each batch's claim commits before its hooks are sent, so receivers run outside any
    transaction of the deliverer and see the state the events describe.
    """
    delivery = Delivery()
    while True:
        claimed, hooked = claim_events(limit)
        delivery.claimed += claimed
        for event in hooked:
            delivery.receiver_errors += send_hook(event)
        if claimed < limit:
            return delivery
