"""Starting a run: validate, create the run and its steps, release the roots."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from uuid import UUID, uuid4

from django.contrib.auth import get_user_model
from django.db import IntegrityError, models
from django.utils import timezone

from workflows.definitions import LeasedNode, Workflow, registry
from workflows.definitions.deadline import deadline_problems
from workflows.definitions.limits import priority_problems
from workflows.engine.advance import Advancer
from workflows.engine.created import Created
from workflows.engine.deadlines import deadline_of
from workflows.engine.events import EventLog
from workflows.engine.fingerprint import fingerprint
from workflows.engine.limits import run_limits
from workflows.engine.scope import RunScope, held_scope
from workflows.engine.sql.inserts import insert_rows
from workflows.engine.transaction import transition
from workflows.errors import IdempotencyConflict, InvalidInput
from workflows.models import Run, Step, Timer, subject_of
from workflows.status import RunStatus, TimerKind

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


def start_run(
    workflow: str | type[Workflow],
    input: dict[str, Any] | None = None,
    *,
    idempotency_key: str | None = None,
    business_key: str | None = None,
    user: AnyUser | None = None,
    subject: models.Model | None = None,
    priority: int | None = None,
    deadline: timedelta | datetime | None = None,
) -> Run:
    """Start a run of ``workflow``; the run (see :func:`start_run_once`)."""
    return start_run_once(
        workflow,
        input,
        idempotency_key=idempotency_key,
        business_key=business_key,
        user=user,
        subject=subject,
        priority=priority,
        deadline=deadline,
    ).value


def start_run_once(
    workflow: str | type[Workflow],
    input: dict[str, Any] | None = None,
    *,
    idempotency_key: str | None = None,
    business_key: str | None = None,
    user: AnyUser | None = None,
    subject: models.Model | None = None,
    priority: int | None = None,
    deadline: timedelta | datetime | None = None,
) -> Created[Run]:
    """Start a run of ``workflow`` (a registered name, latest version, or a class).

    With an ``idempotency_key`` seen before for this workflow, the existing run is
    returned when the input is the same, and :class:`IdempotencyConflict` raised when
    it differs; of two concurrent starts with one key, one creates the run and the
    other returns it. ``subject`` (a saved model instance) is not part of the input's
    fingerprint: a repeat naming another subject returns the first run unchanged.
    ``priority`` (-1000 to 1000, default the workflow's ``default_priority``): its ready
    work is claimed before that of runs with a lower one. ``deadline`` (default the
    workflow's ``deadline``): see :func:`create_run`; a repeat returns the first run
    with its own deadline.

    Returns :class:`Created`: ``created`` is true only for the call whose insert made
    the run; a repeat, and the loser of a race on one key (its insert fails on the
    key's unique index), get the run with ``created=False``.
    """
    definition = registry.resolve(workflow)
    if priority is not None and priority_problems(priority):
        raise InvalidInput(priority_problems(priority)[0], field="priority")
    if deadline is not None and deadline_problems(deadline):
        raise InvalidInput(deadline_problems(deadline)[0], field="deadline")
    data = definition.check_input(input)
    input_hash = fingerprint(data)
    if idempotency_key is not None:
        existing = _existing(definition, idempotency_key, input_hash)
        if existing is not None:
            return Created(existing, created=False)
    try:
        run = _create(
            definition,
            data,
            input_hash,
            idempotency_key,
            business_key or "",
            user,
            subject,
            definition.default_priority if priority is None else priority,
            deadline,
        )
    except IntegrityError:
        if idempotency_key is None:
            raise
        existing = _existing(definition, idempotency_key, input_hash)
        if existing is None:
            raise
        return Created(existing, created=False)
    return Created(run, created=True)


def _existing(definition: type[Workflow], key: str, input_hash: str) -> Run | None:
    run = Run.objects.filter(workflow_name=definition.name, idempotency_key=key).first()
    if run is not None and run.input_hash != input_hash:
        raise IdempotencyConflict(
            f"idempotency key {key!r} was used for run {run.pk} of {definition.name!r} "
            "with a different input",
            run=str(run.pk),
            idempotency_key=key,
        )
    return run


@transition
def _create(
    definition: type[Workflow],
    data: dict[str, Any],
    input_hash: str,
    idempotency_key: str | None,
    business_key: str,
    user: AnyUser | None,
    subject: models.Model | None,
    priority: int,
    deadline: timedelta | datetime | None,
) -> Run:
    scope = create_run(
        definition,
        data,
        input_hash=input_hash,
        idempotency_key=idempotency_key,
        business_key=business_key,
        user=user,
        subject=subject,
        priority=priority,
        deadline=deadline,
    )
    scope.close()
    return scope.run


def create_run(
    definition: type[Workflow],
    data: dict[str, Any],
    *,
    events: EventLog | None = None,
    input_hash: str = "",
    idempotency_key: str | None = None,
    business_key: str = "",
    user: AnyUser | None = None,
    subject: models.Model | None = None,
    parent: Run | None = None,
    parent_step_id: int | None = None,
    parent_item_id: int | None = None,
    priority: int = 0,
    flow_id: UUID | None = None,
    blocked: bool = False,
    deadline: timedelta | datetime | None = None,
) -> RunScope:
    """Create a run with its steps and enter its roots, inside the caller's transaction.

    Returns the new run's scope for the caller to close once it has written its own
    state. A child run is created this way by its parent's transition, writing to the
    parent's ``events``; it does not inherit the parent's ``subject`` (the parent's
    subject is one ``parent_run`` away, and a child started per item is usually about
    something else). A child has its parent's priority.

    A top-level run of a workflow with ``max_concurrent_runs`` takes a place under it
    here, or is created ``queued``: its steps are written, nothing is entered, and it
    starts when a place frees up (:mod:`workflows.engine.limits.run_limits`). A child run
    always starts: its parent already holds a place.

    A member of a flow (``flow_id``) waiting for its upstream members is created
    ``blocked``: its steps are written, nothing is entered, no place is taken; it starts
    when its join is satisfied (:mod:`workflows.engine.flows.settle`).

    ``deadline`` (default the workflow's ``Workflow.deadline``; a child's is its own
    workflow's, never its parent's): the run, queued, blocked or started, gets
    ``Run.deadline`` and a ``deadline`` timer in this transaction
    (:mod:`workflows.engine.deadlines`).
    """
    due = deadline_of(deadline if deadline is not None else definition.deadline)
    run_id = uuid4()
    admitted = not blocked and (parent is not None or run_limits.admit(definition, run_id))
    run = Run.objects.create(
        id=run_id,
        workflow_name=definition.name,
        workflow_version=definition.version,
        snapshot=definition.snapshot(),
        status=(
            RunStatus.BLOCKED if blocked else RunStatus.RUNNING if admitted else RunStatus.QUEUED
        ),
        input=data,
        input_hash=input_hash or fingerprint(data),
        idempotency_key=idempotency_key,
        business_key=business_key,
        **(subject_of(subject) if subject is not None else {}),
        # Only a signed-in user of the project's user model is recorded; the anonymous
        # user and the system leave it empty.
        created_by=user if isinstance(user, get_user_model()) else None,
        started_at=timezone.now() if admitted else None,
        parent_run=parent,
        parent_step_id=parent_step_id,
        parent_item_id=parent_item_id,
        priority=priority,
        flow_id=flow_id,
        deadline=due,
    )
    if due is not None:
        Timer.objects.create(run_id=run.pk, kind=TimerKind.DEADLINE, due_at=due)
    insert_rows(
        Step,
        [
            {
                "run": run.pk,
                "name": name,
                "kind": node.kind,
                "max_attempts": (
                    node.effective_retry.max_attempts if isinstance(node, LeasedNode) else 1
                ),
                **definition.unit_columns(name, priority),
                **node.step_columns(),
            }
            for name, node in definition.nodes.items()
        ],
    )
    scope = held_scope(run, definition, events=events)
    about: dict[str, Any]
    if admitted:
        kind = "run.started"
        about = {"parent_run": str(parent.pk)} if parent is not None else {}
    elif blocked:
        kind = "run.blocked"
        about = {"flow": str(flow_id)}
    else:
        kind = "run.queued"
        about = {"priority": priority, "max_concurrent_runs": run_limits.limit_of(definition.name)}
    if due is not None:
        about["deadline"] = due.isoformat()
    scope.events.add(
        run.pk,
        kind,
        workflow=definition.name,
        version=definition.version,
        idempotency_key=idempotency_key,
        **about,
    )
    if admitted:
        scope.advancer.start()
    return scope


def start_child(
    advancer: Advancer,
    workflow_name: str,
    data: dict[str, Any],
    *,
    step_id: int,
    item_id: int | None = None,
) -> Run:
    """Create a child run inside the parent's transition (its events join the parent's)."""
    definition = registry.latest(workflow_name)
    child = create_run(
        definition,
        definition.check_input(data),
        events=advancer.events,
        parent=advancer.run,
        parent_step_id=step_id,
        parent_item_id=item_id,
        priority=advancer.run.priority,
    )
    child.close()
    advancer.events.add(
        advancer.run.pk, "child.started", step_id=step_id, child=str(child.run.pk), item=item_id
    )
    return child.run
