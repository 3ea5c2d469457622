"""Creating a flow and adding members to it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any
from uuid import UUID, uuid4

from django.contrib.auth import get_user_model
from django.db import IntegrityError

from workflows.definitions import Workflow, registry
from workflows.engine.created import Created
from workflows.engine.events import actor
from workflows.engine.fingerprint import fingerprint
from workflows.engine.flows.edits import FlowEdit
from workflows.engine.flows.graph import (
    bump_revision,
    check_name,
    check_not_self,
    check_open,
    lock_flow,
    member_event,
    members_named,
    write_edges,
)
from workflows.engine.flows.joins import JoinRule, JoinSpec
from workflows.engine.flows.settle import decide
from workflows.engine.scope import unlocked_scope
from workflows.engine.sql.locks import lock_run
from workflows.engine.start import NewRun, create_run
from workflows.engine.transaction import transition
from workflows.errors import IdempotencyConflict, InvalidInput
from workflows.models import Flow, FlowMember, Run
from workflows.status import RunTrigger
from workflows.tags import checked_tags
from workflows.tracing import start_span
from workflows.validation import check_text, max_length

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


def create_flow(
    name: str,
    *,
    key: str | None = None,
    user: AnyUser | None = None,
    tags: dict[str, str] | None = None,
) -> Flow:
    """A new open flow named ``name``, or the one of ``key`` (see :func:`create_flow_once`)."""
    return create_flow_once(name, key=key, user=user, tags=tags).value


def create_flow_once(
    name: str,
    *,
    key: str | None = None,
    user: AnyUser | None = None,
    tags: dict[str, str] | None = None,
) -> Created[Flow]:
    """A new open flow named ``name``; with a ``key`` seen before, that flow (the same
    ``name``), else :class:`IdempotencyConflict`. Of two concurrent creations with one
    key, one creates the flow and the other returns it: ``created`` is true only for the
    call whose insert made the flow (the loser's insert fails on the key's unique
    index). ``tags`` (checked, :func:`workflows.tags.checked_tags`): what its members
    start with unless given their own; not compared on a repeat."""
    check_name(name, field="flow name")
    flow_tags = checked_tags(tags)
    if key is not None:
        check_text(key, field="flow key", limit=max_length(Flow, "key"))
        existing = _existing(name, key)
        if existing is not None:
            return Created(existing, created=False)
    try:
        flow = _create(name, key, user, flow_tags)
    except IntegrityError:
        existing = _existing(name, key) if key is not None else None
        if existing is None:
            raise
        return Created(existing, created=False)
    return Created(flow, created=True)


def _existing(name: str, key: str) -> Flow | None:
    flow = Flow.objects.filter(key=key).first()
    if flow is not None and flow.name != name:
        raise IdempotencyConflict(
            f"flow key {key!r} was used for flow {flow.pk} named {flow.name!r}, not {name!r}",
            flow=str(flow.pk),
            key=key,
        )
    return flow


@transition
def _create(name: str, key: str | None, user: AnyUser | None, tags: dict[str, str]) -> Flow:
    """The flow's row, under a ``workflow.flow`` span whose context its members start in
    (:mod:`workflows.tracing`)."""
    flow_id = uuid4()
    attributes = partial(_flow_attributes, flow_id, name)
    with start_span("workflow.flow", attributes) as traceparent:
        flow = Flow.objects.create(
            id=flow_id,
            name=name,
            key=key,
            created_by=user if isinstance(user, get_user_model()) else None,
            traceparent=traceparent,
            tags=tags,
        )
    with unlocked_scope() as scope:
        scope.events.add_to_flow(flow.pk, "flow.created", flow=name, key=key, by=actor(user))
    return flow


def _flow_attributes(flow_id: UUID, name: str) -> dict[str, str]:
    return {"flowsite.flow.id": str(flow_id), "flowsite.flow.name": name}


def add_to_flow_once(
    flow_id: UUID,
    workflow: str | type[Workflow],
    input: dict[str, Any] | None = None,
    *,
    member: str,
    after: Sequence[str] = (),
    join: JoinSpec = "all",
    user: AnyUser | None = None,
    may_end_members: Callable[[], bool] | None = None,
    tags: dict[str, str] | None = None,
) -> Created[Run]:
    """Add a run of ``workflow`` to the flow as member ``member``, after the members
    named in ``after``; it starts at once if its join is satisfied, else it is created
    ``blocked``. The same ``member`` with the same workflow and input returns its run;
    another workflow or input raises :class:`IdempotencyConflict`. A member that would be
    cancelled at once (an upstream in ``after`` ended otherwise) is refused with
    :class:`InvalidFlowChange` unless ``may_end_members()`` (:mod:`.edits`). ``tags``
    (checked): the member's own; ``None``, the flow's (``create_flow(tags=...)``). Tags
    are not compared on a repeat.

    Returns :class:`Created`: ``created`` is true only for the call whose transition
    inserted the member. The member is looked up under the flow's lock, in the
    transaction that inserts it, so of racing adds of one member exactly one inserts and
    the others find its row once they hold the lock.
    """
    definition = registry.resolve(workflow)
    data = definition.check_input(input)
    member_tags = None if tags is None else checked_tags(tags)
    rule = JoinRule.parse(join)
    check_name(member, field="member")
    upstream_names = _upstream_names(after)
    for upstream in upstream_names:
        check_not_self(upstream, member)
    edit = FlowEdit("add_to_flow", user, may_end_members)
    return _add(flow_id, definition, data, member, upstream_names, rule, edit, member_tags)


def _upstream_names(after: Sequence[str]) -> list[str]:
    if isinstance(after, str) or not isinstance(after, list | tuple):
        raise InvalidInput("after must be a list of member names", field="after")
    return list(dict.fromkeys(check_name(name, field="after") for name in after))


@transition
def _add(
    flow_id: UUID,
    definition: type[Workflow],
    data: dict[str, Any],
    name: str,
    upstream_names: list[str],
    rule: JoinRule,
    edit: FlowEdit,
    tags: dict[str, str] | None,
) -> Created[Run]:
    user = edit.user
    flow = lock_flow(flow_id)
    input_hash = fingerprint(data)
    existing = FlowMember.objects.select_related("run").filter(flow=flow, name=name).first()
    if existing is not None:
        if (existing.run.workflow_name, existing.run.input_hash) != (definition.name, input_hash):
            raise IdempotencyConflict(
                f"member {name!r} of flow {flow.name!r} is a run of "
                f"{existing.run.workflow_name!r} with another input",
                flow=str(flow.pk),
                member=name,
                run=str(existing.run_id),
            )
        return Created(existing.run, created=False)
    check_open(flow, "new members")
    upstreams = sorted(members_named(flow, upstream_names), key=lambda m: m.pk)
    # Upstream before downstream (see the package docstring): each upstream's end is
    # either committed now, or will see the new member's edges.
    statuses = [(upstream.name, lock_run(upstream.run_id).status) for upstream in upstreams]
    revision = bump_revision(flow)
    scope = create_run(
        NewRun(
            definition,
            data,
            input_hash=input_hash,
            user=user,
            priority=definition.default_priority,
            flow_id=flow.pk,
            blocked=True,
            trace_parent=flow.traceparent,
            trigger=RunTrigger.FLOW,
            tags=flow.tags if tags is None else tags,
        )
    )
    run = scope.run
    member = FlowMember.objects.create(
        flow=flow, name=name, run=run, join=rule.kind, join_count=rule.count
    )
    member_event(
        scope.events,
        member,
        "flow.member_added",
        workflow=definition.name,
        after=upstream_names,
        join=rule.spec,
        revision=revision,
        by=actor(user),
    )
    write_edges(flow, upstreams, member, revision, scope.events, by=actor(user))
    decide(
        member,
        run,
        scope.events,
        more_may_come=True,
        upstreams=statuses,
        edit=edit,
        just_added=True,
    )
    scope.close()
    return Created(run, created=True)
