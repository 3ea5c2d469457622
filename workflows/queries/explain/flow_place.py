"""A flow member's place in its flow, and what it says: the ``blocked`` hold of a
member waiting on its upstream members, and why a member a failed dependency cancelled
may not be replayed.

Read with two more queries, for flow members only (:data:`FLOW_QUERIES`).
"""

from __future__ import annotations

from workflows.engine.flows.heal import cancelled_for_dependency, unmet_reason
from workflows.engine.flows.joins import JoinRule, Verdict
from workflows.holds import HoldKind
from workflows.models import FlowEdge, FlowMember, Run
from workflows.queries.explain.records import FlowPlace, WaitingOn
from workflows.status import RUN_FINAL, FlowStatus, RunStatus

__all__ = ["DEPENDENCY_FAILED", "FLOW_QUERIES", "blocked", "dependency_unmet", "flow_place"]


# The queries a flow member's explanation adds: its member row with the flow's, and its
# upstream members with their runs' statuses.
FLOW_QUERIES = 2

# The error code of a flow member cancelled because its join can no longer be satisfied
# (written by ``workflows.engine.flows.settle``).
DEPENDENCY_FAILED = "dependency_failed"


def flow_place(run: Run) -> FlowPlace:
    """The member's place in its flow (:data:`FLOW_QUERIES`). Its member row commits
    with the run, and goes with it."""
    member = (
        FlowMember.objects.filter(run_id=run.pk)
        .values(
            "id",
            "name",
            "join",
            "join_count",
            "flow_id",
            "flow__name",
            "flow__status",
            "flow__revision",
        )
        .get()
    )
    rule = JoinRule.stored(member["join"], member["join_count"])
    upstream = tuple(
        {"member": name, "run": str(run_id), "status": status}
        for name, run_id, status in FlowEdge.objects.filter(downstream_id=member["id"])
        .order_by("id")
        .values_list("upstream__name", "upstream__run_id", "upstream__run__status")
    )
    # A member cancelled when its flow closed on a join that can never be satisfied
    # names no upstream member: its error's message says so.
    error = run.error if isinstance(run.error, dict) else {}
    failed = (
        {"member": error["upstream"], "status": error.get("upstream_status", "")}
        if error.get("code") == DEPENDENCY_FAILED and error.get("upstream")
        else None
    )
    return FlowPlace(
        flow=member["flow_id"],
        flow_name=member["flow__name"],
        flow_status=member["flow__status"],
        revision=member["flow__revision"],
        member=member["name"],
        join=rule.spec,
        join_words=rule.describe(),
        upstream=upstream,
        failed_upstream=failed,
    )


def blocked(run: Run, place: FlowPlace | None) -> list[WaitingOn]:
    """A flow member waiting for its upstream members under its join. One whose join is
    decided already (an upstream's end not yet settled by a process that died) says so:
    the ``repair_flows`` scanner starts or cancels it on its next pass."""
    if run.status != RunStatus.BLOCKED or place is None:
        return []
    statuses = [entry["status"] for entry in place.upstream]
    rule = JoinRule.parse(place.join)
    verdict = rule.verdict(statuses, more_may_come=place.flow_status == FlowStatus.OPEN)
    completed = statuses.count(RunStatus.COMPLETED)
    pending = [entry for entry in place.upstream if entry["status"] not in RUN_FINAL]
    message = (
        f"member {place.member!r} of flow {place.flow_name!r} waits until "
        f"{place.join_words}: {completed} of {len(statuses)} completed"
    )
    if pending:
        waits = ", ".join(f"{entry['member']} ({entry['status']})" for entry in pending)
        message += f"; waiting on {waits}"
    if verdict is not Verdict.WAITING:
        message += f"; its join is {_DECIDED[verdict]}"
    elif not pending:
        message += (
            "; every upstream member has ended, so it waits for a new edge into it while "
            "the flow is open (or cancel it)"
        )
    return [
        WaitingOn(
            HoldKind.BLOCKED,
            None,
            {
                "flow": str(place.flow),
                "flow_name": place.flow_name,
                "member": place.member,
                "join": place.join,
                "join_words": place.join_words,
                "upstream": [dict(entry) for entry in place.upstream],
                "completed": completed,
                "waiting_for": [entry["member"] for entry in pending],
                "verdict": verdict.value,
                "message": message,
            },
        )
    ]


# What a blocked member's explanation adds when its join is decided but it still waits.
_DECIDED = {
    Verdict.SATISFIED: "satisfied: the repair_flows scanner starts it on its next pass",
    Verdict.IMPOSSIBLE: (
        "no longer satisfiable: the repair_flows scanner cancels it (dependency_failed) on "
        "its next pass"
    ),
}


def dependency_unmet(run: Run, place: FlowPlace | None) -> str | None:
    """Why a member cancelled with ``dependency_failed`` may not be retried or rerun
    (the verbs' :class:`~workflows.errors.DependencyUnmet`); ``None`` for any other run.
    Read from the member's place, which holds its upstreams' statuses already."""
    if place is None or not cancelled_for_dependency(run.status, run.error):
        return None
    return unmet_reason(
        JoinRule.parse(place.join),
        [(up["member"], up["status"]) for up in place.upstream],
        more_may_come=place.flow_status == FlowStatus.OPEN,
    )
