"""The JSON body of a delivery: what an event says, in the Standard Webhooks shape.

``{"type": "run.completed", "timestamp": "<the event's ISO time>", "data": {...}}``,
where ``data`` is the event's own payload plus ``run_id``, ``step_id``, ``step``,
``workflow`` and ``event_id``; ``tags`` (the run's tags, as they are when the delivery
is recorded; ``{}`` for a run without, absent for an event of no run); and ``flow_id``
when the event is about a flow: an event of the flow itself (``run_id``, ``workflow``
empty: ``flow.sealed``, ``flow.completed``) or of one of its members (a member's
``flow.edge_added`` and its ``run.completed`` alike), so a receiver can tell a member's
end from a lone run's; and ``schedule`` (its key) when the event is a run schedule's
(``schedule.fired``: ``run_id`` is the run the slot started; ``workflow`` the
schedule's). The body is computed once, when the delivery is recorded, and kept on the
delivery: the purge may delete the run and its history, and the log and a replay still
have what was (or would have been) sent.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from uuid import UUID

from django.core.serializers.json import DjangoJSONEncoder


def event_body(
    *,
    webhook_type: str,
    event_id: int,
    created_at: datetime,
    run_id: UUID | None,
    step_id: int | None,
    step: str | None,
    workflow: str | None,
    payload: dict[str, Any],
    flow_id: UUID | None = None,
    schedule: str | None = None,
    tags: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The body of one event; the identifying fields win over same-named payload keys."""
    data = {
        **payload,
        "event_id": event_id,
        "run_id": str(run_id) if run_id is not None else None,
        "step_id": step_id,
        "step": step,
        "workflow": workflow,
    }
    if run_id is not None:
        data["tags"] = tags or {}
    if flow_id is not None:
        data["flow_id"] = str(flow_id)
    if schedule is not None:
        data["schedule"] = schedule
    return {"type": webhook_type, "timestamp": created_at.isoformat(), "data": data}


def encode(body: dict[str, Any]) -> bytes:
    """The bytes sent and signed: compact JSON, keys in a fixed order, UTF-8."""
    return json.dumps(
        body, cls=DjangoJSONEncoder, separators=(",", ":"), sort_keys=True, ensure_ascii=False
    ).encode()
