"""The operator verbs of an explanation: every verb with its verdict now, in words.

A run verb is refused by the guard of its status (:mod:`workflows.engine.guards`); an
ended run's replay verbs also by what became of its completed work
(:mod:`workflows.engine.replay`), read with one more query for ended runs of workflows
that declare compensations (:data:`REPLAY_QUERIES`); a member a failed dependency
cancelled by its unmet join. What a surface shows is advice: the verb checks again under
the run lock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workflows.engine.guards import DISMISS, RERUN, RETRY, RUN_VERBS, STEP_VERBS, UNDISMISS
from workflows.engine.replay import (
    downstream_of,
    facts_of,
    rerun_compensation_refusal,
    retry_plan,
)
from workflows.models import Run
from workflows.queries.explain.reading import registered
from workflows.queries.explain.records import Action
from workflows.status import NodeKind, RunStatus, StepStatus

__all__ = ["REPLAY_QUERIES", "allowed_actions", "replay_refusals"]


# The query an ended run's explanation adds when its workflow declares compensations:
# what became of the work its steps completed (the replay verbs' refusals).
REPLAY_QUERIES = 1


@dataclass(frozen=True)
class ReplayRefusals:
    """Why the replay verbs of an ended run may not, beyond its status: the retry's
    reason, and each step a rerun may not start from with its reason."""

    retry: str | None
    rerun: Mapping[str, str]


def replay_refusals(run: Run, steps: list[dict[str, Any]]) -> ReplayRefusals | None:
    """What became of an ended run's completed work says about replaying it: one query,
    for a workflow that declares compensations (else nothing can refuse)."""
    workflow = registered(run) if run.status in RETRY.accepts | RERUN.accepts else None
    if workflow is None or not any(
        getattr(node, "compensate_path", "") for node in workflow.nodes.values()
    ):
        return None
    facts = facts_of(run.pk, ((s["id"], s["name"], s["status"], s["generation"]) for s in steps))
    if set(facts) != set(workflow.nodes):
        return None  # steps out of line with the definition: the verbs will say
    retry = None
    if run.status in RETRY.accepts and run.status != RunStatus.COMPENSATION_FAILED:
        attempts = {step["name"]: step["attempt"] for step in steps}
        retry = retry_plan(workflow.graph, facts, attempts).refusal
    rerun: dict[str, str] = {}
    if run.status in RERUN.accepts:
        for name in workflow.nodes:
            reason = rerun_compensation_refusal(name, downstream_of(workflow.graph, [name]), facts)
            if reason is not None:
                rerun[name] = reason
    return ReplayRefusals(retry, rerun)


def allowed_actions(
    run_status: str,
    steps: list[dict[str, Any]],
    replay: ReplayRefusals | None = None,
    unmet: str | None = None,
    *,
    dismissed: bool = False,
) -> list[Action]:
    """Every run verb; each step verb for the steps in a status it accepts; a ``rerun``
    refused from a step for what became of the run's work; the decisions of waiting
    gates. In that order, steps in their order. ``unmet``: why a member a failed
    dependency cancelled may not be retried or rerun. ``dismissed``: whether the run is,
    so that of dismiss and undismiss only the one that would change it is offered."""
    actions = [
        _action(
            verb.name,
            verb.summary,
            verb.refusal(run_status)
            or (unmet if verb in (RETRY, RERUN) else None)
            or (replay.retry if replay is not None and verb is RETRY else None)
            or _dismissal_refusal(verb.name, dismissed),
        )
        for verb in RUN_VERBS.values()
    ]
    for step in steps:
        for verb in STEP_VERBS.values():
            if step["status"] in verb.accepts:
                reason = verb.refusal(step["status"], run_status)
                actions.append(_action(verb.name, verb.summary, reason, step))
        if replay is not None and step["name"] in replay.rerun:
            actions.append(_action(RERUN.name, RERUN.summary, replay.rerun[step["name"]], step))
        if step["kind"] == NodeKind.GATE and step["status"] == StepStatus.WAITING:
            actions.append(_action("approve", "approve the gate", None, step))
            actions.append(_action("reject", "reject the gate", None, step))
    return actions


def _dismissal_refusal(verb: str, dismissed: bool) -> str | None:
    """Why dismiss or undismiss would change nothing (the verbs themselves are no-ops)."""
    if verb == DISMISS.name and dismissed:
        return "run is dismissed already"
    if verb == UNDISMISS.name and not dismissed:
        return "run is not dismissed"
    return None


def _action(
    verb: str, summary: str, reason: str | None, step: dict[str, Any] | None = None
) -> Action:
    return Action(
        verb=verb,
        allowed=reason is None,
        reason=reason,
        summary=summary,
        step=step["name"] if step else None,
        step_id=step["id"] if step else None,
    )
