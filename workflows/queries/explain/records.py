"""What ``explain(run)`` returns: the explanation and its parts, each JSON-ready by
``as_dict()`` for the API and the commands."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from workflows.engine.flows.joins import JoinSpec
from workflows.holds import HoldKind

__all__ = ["Action", "Explanation", "FlowPlace", "WaitingOn", "json_ready"]


@dataclass(frozen=True)
class WaitingOn:
    """One thing that holds the run: its kind (the :data:`~workflows.holds.HOLDS` table
    says how it reads and what releases it), the step it belongs to, and details."""

    kind: HoldKind
    step: str | None
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # A kind missing from the table is refused where it is made, not where it shows.
        object.__setattr__(self, "kind", HoldKind(self.kind))

    def as_dict(self) -> dict[str, Any]:
        return {"kind": str(self.kind), "step": self.step, **json_ready(dict(self.details))}


@dataclass(frozen=True)
class Action:
    """One operator verb, on the run or on one step, and whether it is allowed now.

    ``reason`` says in words why not (the guard's own wording); ``None`` when allowed.
    What a surface shows is advice: the verb checks again under the run lock.
    """

    verb: str
    allowed: bool
    reason: str | None
    summary: str
    step: str | None = None
    step_id: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "verb": self.verb,
            "step": self.step,
            "step_id": self.step_id,
            "allowed": self.allowed,
            "reason": self.reason,
            "summary": self.summary,
        }


@dataclass(frozen=True)
class FlowPlace:
    """A flow member's place in its flow: the flow, the member's join, its upstream
    members (``member``, ``run``, ``status``, in the order their edges were staged) and,
    for a member cancelled with ``dependency_failed`` because of one, the upstream member
    that failed (``member``, ``status``)."""

    flow: UUID
    flow_name: str
    flow_status: str
    revision: int
    member: str
    join: JoinSpec
    join_words: str
    upstream: tuple[Mapping[str, str], ...]
    failed_upstream: Mapping[str, str] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "flow": str(self.flow),
            "flow_name": self.flow_name,
            "flow_status": self.flow_status,
            "revision": self.revision,
            "member": self.member,
            "join": self.join,
            "join_words": self.join_words,
            "upstream": [dict(entry) for entry in self.upstream],
            "failed_upstream": dict(self.failed_upstream) if self.failed_upstream else None,
        }


@dataclass(frozen=True)
class Explanation:
    """Where a run stands, what holds it, what an operator may do, whether it needs one.

    ``version`` is the run row's compare-and-set version: a surface that acts on what
    it showed can tell whether the run moved since. ``as_of`` is the moment the flags
    and the attention class were computed for. ``flow`` is the run's place in its flow,
    ``None`` for a run that is no flow's member. ``deadline``: when the run must have
    ended (``None``: no deadline); :attr:`time_left` is counted from ``as_of``.
    ``loops``: where each loop and polling task of the run stands, in declaration order
    (see :func:`loops` for an entry's keys).
    """

    run: UUID
    workflow: str
    workflow_version: int
    status: str
    version: int
    attention: str
    as_of: datetime
    waiting_on: tuple[WaitingOn, ...]
    allowed_actions: tuple[Action, ...]
    steps: tuple[Mapping[str, Any], ...]
    flow: FlowPlace | None = None
    deadline: datetime | None = None
    loops: tuple[Mapping[str, Any], ...] = ()

    @property
    def time_left(self) -> timedelta | None:
        """How long until the deadline, as of ``as_of``: negative once it passed."""
        return self.deadline - self.as_of if self.deadline is not None else None

    @property
    def deadline_passed(self) -> bool:
        return self.deadline is not None and self.deadline <= self.as_of

    def as_dict(self) -> dict[str, Any]:
        """The explanation as JSON-ready data: times as ISO 8601 strings, the time left
        in seconds."""
        left = self.time_left
        return {
            "run": str(self.run),
            "workflow": self.workflow,
            "workflow_version": self.workflow_version,
            "status": self.status,
            "version": self.version,
            "attention": self.attention,
            "as_of": self.as_of.isoformat(),
            "waiting_on": [entry.as_dict() for entry in self.waiting_on],
            "allowed_actions": [action.as_dict() for action in self.allowed_actions],
            "steps": [dict(step) for step in self.steps],
            "flow": self.flow.as_dict() if self.flow else None,
            "deadline": self.deadline.isoformat() if self.deadline is not None else None,
            "time_left": left.total_seconds() if left is not None else None,
            "deadline_passed": self.deadline_passed,
            "loops": [json_ready(dict(entry)) for entry in self.loops],
        }


def json_ready(value: Any) -> Any:
    """Times as ISO 8601 strings, recursively; everything else is JSON already."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {key: json_ready(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(item) for item in value]
    return value
