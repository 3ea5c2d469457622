"""Starting a run: validate, create the run and its steps, release the roots."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
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
from workflows.engine.runs import record_entry
from workflows.engine.scope import RunScope, held_scope
from workflows.engine.sql.inserts import insert_rows
from workflows.engine.tags import write_start_tags
from workflows.engine.transaction import transition
from workflows.errors import BusinessKeyInUse, IdempotencyConflict, InvalidInput
from workflows.models import Run, Step, Timer, subject_of
from workflows.status import RunStatus, RunTrigger, TimerKind
from workflows.tags import checked_tags
from workflows.tracing import start_span
from workflows.variables import checked_variables

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


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
    variables: dict[str, Any] | None = None,
    title: str = "",
    trigger: str = RunTrigger.CODE,
    tags: dict[str, str] | None = None,
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
    with its own deadline. ``variables``: the run's first variables
    (:func:`workflows.variables.checked_variables`). ``tags``: the run's tags
    (:func:`workflows.tags.checked_tags`). ``variables``, ``title``, ``trigger`` and
    ``tags`` are not part of the fingerprint either: a repeat returns the first run with
    its own.

    With ``Workflow.unique_business_key``, a ``business_key`` a live run of the workflow
    holds is refused with :class:`BusinessKeyInUse` by the database's partial unique
    index, unless the start is a repeat of that run's (same idempotency key).

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
    initial = checked_variables(variables)
    run_tags = checked_tags(tags)
    input_hash = fingerprint(data)
    if idempotency_key is not None:
        existing = _existing(definition, idempotency_key, input_hash)
        if existing is not None:
            return Created(existing, created=False)
    try:
        run = _create(
            NewRun(
                definition,
                data,
                input_hash=input_hash,
                idempotency_key=idempotency_key,
                business_key=business_key or "",
                user=user,
                subject=subject,
                priority=definition.default_priority if priority is None else priority,
                deadline=deadline,
                variables=initial,
                tags=run_tags,
                title=title,
                trigger=trigger,
            )
        )
    except BusinessKeyInUse:
        # Of two racing starts with one idempotency key, the business key's index may be
        # the one that refuses the loser: it gets the winner's run all the same.
        existing = _existing(definition, idempotency_key, input_hash) if idempotency_key else None
        if existing is None:
            raise
        return Created(existing, created=False)
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


@dataclass(frozen=True)
class ChildOf:
    """Whose child a run is: the parent run, and its step (or fan-out item) that waits
    for the child."""

    run: Run
    step_id: int
    item_id: int | None = None

    def columns(self) -> dict[str, Any]:
        """The child run's columns that name its parent."""
        return dict(parent_run=self.run, parent_step_id=self.step_id, parent_item_id=self.item_id)


@dataclass(frozen=True)
class NewRun:
    """A run to create: its workflow and checked input, and what its start says of it.

    ``input_hash``: the input's fingerprint when the caller has it already (computed
    otherwise). ``variables``: the run's first variables, checked
    (:func:`workflows.variables.checked_variables`); a child run, a flow member and a
    scheduled run start with none. ``tags``: the run's tags, checked
    (:func:`workflows.tags.checked_tags`); a child run's are its parent's and a flow
    member's its flow's unless given their own. ``title``: what the lists show of it;
    ``trigger``: the surface that started it (:class:`~workflows.status.RunTrigger`).
    ``parent``: a child run's. ``flow_id`` with ``blocked``: a flow member waiting for its
    upstream members.
    ``schedule_id`` with ``scheduled_for``: a run a schedule started, and the slot it
    started for.
    """

    definition: type[Workflow]
    data: dict[str, Any]
    input_hash: str = ""
    idempotency_key: str | None = None
    business_key: str = ""
    user: AnyUser | None = None
    title: str = ""
    trigger: str = RunTrigger.CODE
    subject: models.Model | None = None
    priority: int = 0
    deadline: timedelta | datetime | None = None
    variables: dict[str, Any] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    parent: ChildOf | None = None
    flow_id: UUID | None = None
    blocked: bool = False
    schedule_id: int | None = None
    scheduled_for: datetime | None = None
    # The W3C traceparent to start under (a flow member's flow's); a child starts under
    # its parent run's, any other run under its caller's current span (workflows.tracing).
    trace_parent: str = ""

    @property
    def traced_under(self) -> str:
        """The ``traceparent`` the run's ``workflow.start`` span is a child of."""
        return self.parent.run.traceparent if self.parent is not None else self.trace_parent


@transition
def _create(new: NewRun) -> Run:
    scope = create_run(new)
    scope.close()
    return scope.run


def create_run(new: NewRun, *, events: EventLog | None = None) -> RunScope:
    """Create a run with its steps and enter its roots, inside the caller's transaction.

    Returns the new run's scope for the caller to close once it has written its own
    state. A child run is created this way by its parent's transition, writing to the
    parent's ``events``; it does not inherit the parent's ``subject`` (the parent's
    subject is one ``parent_run`` away, and a child started per item is usually about
    something else). A child has its parent's priority, and its tags unless given its own.

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
    definition = new.definition
    due = deadline_of(new.deadline if new.deadline is not None else definition.deadline)
    run_id = uuid4()
    admitted = not new.blocked and (new.parent is not None or run_limits.admit(definition, run_id))
    attributes = partial(_start_attributes, new, run_id)
    with start_span("workflow.start", attributes, parent=new.traced_under) as traceparent:
        run = _insert_run(new, run_id, admitted, due, traceparent)
        if due is not None:
            Timer.objects.create(run_id=run.pk, kind=TimerKind.DEADLINE, due_at=due)
        _insert_steps(run, definition, new.priority)
        scope = held_scope(run, definition, events=events)
        kind, about = _arrival(new, admitted)
        if due is not None:
            about["deadline"] = due.isoformat()
        record_entry(scope.events, run, definition, kind, **about)
        if new.variables:
            scope.events.add(run.pk, "run.variables_set", step=None, patches=[new.variables])
        if new.tags:
            write_start_tags(run.pk, run.created_at, new.tags)
            scope.events.add(run.pk, "run.tags_set", step=None, tags=new.tags)
        if admitted:
            scope.advancer.start()
    return scope


def _start_attributes(new: NewRun, run_id: UUID) -> dict[str, str | int]:
    """What a run's ``workflow.start`` span says of it (docs/operations/traces.md)."""
    attributes: dict[str, str | int] = {
        "flowsite.run.id": str(run_id),
        "flowsite.workflow.name": new.definition.name,
        "flowsite.workflow.version": new.definition.version,
    }
    if new.business_key:
        attributes["flowsite.run.business_key"] = new.business_key
    if new.parent is not None:
        attributes["flowsite.run.parent_id"] = str(new.parent.run.pk)
    if new.flow_id is not None:
        attributes["flowsite.flow.id"] = str(new.flow_id)
    if new.schedule_id is not None:
        attributes["flowsite.schedule.id"] = new.schedule_id
    return attributes


def _insert_run(
    new: NewRun, run_id: UUID, admitted: bool, due: datetime | None, traceparent: str
) -> Run:
    """The run's row: ``running`` when admitted, else ``blocked`` or ``queued``;
    ``traceparent``: its ``workflow.start`` span's."""
    definition, subject = new.definition, new.subject
    status = RunStatus.RUNNING if admitted else RunStatus.QUEUED
    return Run.objects.create(
        id=run_id,
        workflow_name=definition.name,
        workflow_version=definition.version,
        snapshot=definition.snapshot(),
        status=RunStatus.BLOCKED if new.blocked else status,
        input=new.data,
        input_hash=new.input_hash or fingerprint(new.data),
        variables=new.variables,
        tags=new.tags,
        idempotency_key=new.idempotency_key,
        business_key=new.business_key,
        unique_business_key=definition.unique_business_key,
        title=new.title,
        trigger=new.trigger,
        **(subject_of(subject) if subject is not None else {}),
        # Only a signed-in user of the project's user model is recorded; the anonymous
        # user and the system leave it empty.
        created_by=new.user if isinstance(new.user, get_user_model()) else None,
        started_at=timezone.now() if admitted else None,
        **(new.parent.columns() if new.parent is not None else {}),
        priority=new.priority,
        flow_id=new.flow_id,
        deadline=due,
        schedule_id=new.schedule_id,
        scheduled_for=new.scheduled_for,
        traceparent=traceparent,
    )


def _insert_steps(run: Run, definition: type[Workflow], priority: int) -> None:
    """One ``pending`` step row for each node of the definition, in one statement."""
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


def _arrival(new: NewRun, admitted: bool) -> tuple[str, dict[str, Any]]:
    """The event that says how the run arrived (started, blocked, queued), and what it
    says besides the workflow."""
    if admitted:
        parent = new.parent
        return "run.started", {"parent_run": str(parent.run.pk)} if parent is not None else {}
    if new.blocked:
        return "run.blocked", {"flow": str(new.flow_id)}
    limit = run_limits.limit_of(new.definition.name)
    return "run.queued", {"priority": new.priority, "max_concurrent_runs": limit}


def start_child(
    advancer: Advancer,
    workflow_name: str,
    data: dict[str, Any],
    *,
    step_id: int,
    item_id: int | None = None,
    tags: dict[str, str] | None = None,
) -> Run:
    """Create a child run inside the parent's transition (its events join the parent's).
    It has its parent's priority, and its parent's tags unless given ``tags`` (checked)."""
    definition = registry.latest(workflow_name)
    child = create_run(
        NewRun(
            definition,
            definition.check_input(data),
            parent=ChildOf(advancer.run, step_id, item_id),
            priority=advancer.run.priority,
            tags=advancer.run.tags if tags is None else tags,
            trigger=RunTrigger.CHILD,
        ),
        events=advancer.events,
    )
    child.close()
    advancer.events.add(
        advancer.run.pk, "child.started", step_id=step_id, child=str(child.run.pk), item=item_id
    )
    return child.run
