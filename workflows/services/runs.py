"""Starting runs and the operator verbs on a whole run: cancel, retry, pause, resume,
terminate, rerun from a step, change its priority."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple
from uuid import UUID

from django.db import models

from workflows import engine
from workflows.definitions import Workflow, registry
from workflows.definitions.limits import priority_problems
from workflows.engine.created import Created, value_of
from workflows.engine.guards import PRIORITY
from workflows.engine.verbs import cancel, pause, rerun, retry, terminate
from workflows.engine.verbs.children import cancel_children, terminate_children
from workflows.engine.verbs.priority import change_priority as set_priority
from workflows.errors import (
    DefinitionError,
    InvalidInput,
    InvalidTransition,
)
from workflows.models import Run, Step
from workflows.services.targets import run_id_of, step_of
from workflows.status import RunStatus, RunTrigger
from workflows.validation import check_json, check_text, max_length

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
    """Start a run of ``workflow`` (a registered name, latest version, or a class); the
    other options as :func:`start_run`.

    With an ``idempotency_key`` seen before for this workflow, the existing run is
    returned when the input is the same, and :class:`IdempotencyConflict` raised when
    it differs; of two concurrent starts with one key, one creates the run and the
    other returns it. Input that is not storable JSON and keys that are not strings,
    hold a NUL character or exceed their column raise :class:`InvalidInput` before
    anything is written (see :mod:`workflows.validation`).

    Returns :class:`~workflows.engine.created.Created`: the run, and whether this call
    created it (decided by the insert that won, so of racing starts with one key
    exactly one says ``created``). :func:`start_run` returns the run alone.
    """
    _check_start(
        registry.resolve(workflow),
        input,
        idempotency_key=idempotency_key,
        business_key=business_key,
        subject=subject,
        priority=priority,
        title=title,
        trigger=trigger,
    )
    return engine.start_run_once(
        workflow,
        input,
        idempotency_key=idempotency_key,
        business_key=business_key,
        user=user,
        subject=subject,
        priority=priority,
        deadline=deadline,
        variables=variables,
        title=title,
        trigger=trigger,
        tags=tags,
    )


start_run = value_of(
    start_run_once,
    "start_run",
    """Start a run of ``workflow`` (a registered name, latest version, or a class);
    return it. The keys and the idempotency of a start as :func:`start_run_once`, which
    also says whether this call created the run.

    ``subject`` ties the run to one of the host's saved model instances (see
    ``Run.objects.for_object``); an unsaved instance or any other value is
    :class:`InvalidInput`. It is not part of the idempotency fingerprint, and child
    runs do not inherit it.

    ``priority`` (-1000 to 1000; default the workflow's ``default_priority``) orders
    the run's ready work, and the run in its workflow's queue while it waits for a
    place under ``max_concurrent_runs``; anything else is :class:`InvalidInput`.

    ``deadline`` (default the workflow's ``Workflow.deadline``): a positive ``timedelta``
    from now, or a timezone-aware ``datetime`` in the future, both on the database
    clock. A run not ended by then fails with ``deadline_exceeded``, its running
    attempts lose their lease and what it completed is compensated
    (:mod:`workflows.engine.deadlines`). Anything else is :class:`InvalidInput`.

    ``variables``: the run's first variables, a JSON object its steps read as
    ``ctx.variables`` and change with ``ctx.set_variables`` (docs/guide/variables.md).
    Applied as a merge patch to an empty object (a ``null`` member is not stored);
    anything but a JSON object of storable JSON, or one past
    ``WORKFLOWS["MAX_VARIABLES_BYTES"]``, is :class:`InvalidInput` (``field
    "variables"``), refused before anything is written. Not part of the idempotency
    fingerprint: a repeat returns the first run with its own variables.

    ``tags``: the run's tags, a dict of short keys to short strings to find it by
    (``list_runs(tags=...)``, the API's ``?tag=``, the console; docs/guide/tags.md).
    A key matches ``^[a-z][a-z0-9_.-]{0,63}$``, a value is a string of at most 255
    characters without NUL, a run has at most 32; anything else is :class:`InvalidInput`
    naming the tag, before anything is written. Steps change them with
    ``ctx.set_tags``; child runs and flow members start with their parent's. Not part
    of the idempotency fingerprint: a repeat returns the first run with its own tags.

    ``title`` (text up to 200 characters, no NUL): what the console's lists and the API
    show of the run; empty, they show its workflow. ``trigger`` says which surface
    started the run (:class:`~workflows.status.RunTrigger`; ``"code"`` for a Python
    call; the admin, the API, the commands, schedules, flows and parents say their own),
    and ``user``, recorded as ``created_by``, who. Neither is part of the idempotency
    fingerprint: a repeat with another title or trigger returns the first run as it is.
    With ``Workflow.unique_business_key``, a ``business_key`` another live run of the
    workflow holds is :class:`BusinessKeyInUse`.
    """,
)


def _check_start(
    definition: type[Workflow],
    input: Any,
    *,
    idempotency_key: str | None,
    business_key: str | None,
    subject: models.Model | None,
    priority: int | None,
    title: str,
    trigger: str,
) -> None:
    """Refuse, before anything is written, what the database could not store or the
    engine would reject: the priority, the name, the input's JSON, the keys, the subject,
    the title and the trigger."""
    if priority is not None:
        _check_priority(priority)
    check_text(title, field="title", limit=max_length(Run, "title"))
    if trigger not in RunTrigger.values:
        raise InvalidInput(
            f"trigger must be one of {', '.join(RunTrigger.values)}, got {trigger!r}",
            field="trigger",
        )
    check_text(
        definition.name,
        field=f"the name of {definition.label()}",
        limit=max_length(Run, "workflow_name"),
        error=DefinitionError,
    )
    if isinstance(input, dict):  # anything else is refused by the definition's check_input
        check_json(input, field="input")
    if idempotency_key is not None:
        check_text(
            idempotency_key, field="idempotency key", limit=max_length(Run, "idempotency_key")
        )
    if business_key is not None:
        check_text(business_key, field="business key", limit=max_length(Run, "business_key"))
    if subject is not None:
        _check_subject(subject)


def _check_priority(value: Any) -> None:
    problems = priority_problems(value)
    if problems:
        raise InvalidInput(problems[0], field="priority")


def _check_subject(subject: Any) -> None:
    """Refuse what a generic relation cannot point at: a non-model or an unsaved row.

    ``_state.adding`` rather than ``pk is None``: a model whose key defaults to
    ``uuid4`` has a key before it is saved, and a run pointing at it would dangle.
    """
    if not isinstance(subject, models.Model):
        raise InvalidInput(f"subject must be a saved model instance, got {type(subject).__name__}")
    if subject._state.adding or subject.pk is None:
        raise InvalidInput(
            f"subject {subject._meta.label} is not saved: save it before starting a run about it"
        )
    check_text(str(subject.pk), field="subject's primary key", limit=max_length(Run, "subject_id"))


def cancel_run(
    run: Run | UUID | str, *, reason: str = "", compensate: bool = True, user: AnyUser | None = None
) -> Run:
    """Cancel a running or waiting run (and its children); compensate unless told not to.

    Idempotent: a run already cancelling, cancelled or terminated is returned unchanged,
    with nothing recorded (:func:`request_cancel` also says which happened).
    """
    return request_cancel(run, reason=reason, compensate=compensate, user=user).run


class CancelRequest(NamedTuple):
    """What a cancel did: the run after it, and whether it had been cancelled already
    (cancelling, cancelled or terminated), in which case nothing changed."""

    run: Run
    already: bool

    @property
    def stopped_as(self) -> str:
        """How the run was stopped, in a word: ``terminated`` or ``cancelled``."""
        return "terminated" if self.run.status == RunStatus.TERMINATED else "cancelled"


def request_cancel(
    run: Run | UUID | str, *, reason: str = "", compensate: bool = True, user: AnyUser | None = None
) -> CancelRequest:
    """:func:`cancel_run`, saying whether the run had been cancelled already: what the
    surfaces call, so that a second cancel answers "already cancelled", not an error."""
    check_text(reason, field="cancel reason")
    run_id = run_id_of(run)
    cancelled = cancel.cancel_run(run_id, reason=reason, compensate=compensate, user=user)
    # Also after a cancel that found the run cancelled already: a child left alive by an
    # earlier cancel that stopped between the parent and its children is cancelled now.
    cancel_children(run_id)
    return CancelRequest(Run.objects.get(pk=run_id), already=not cancelled)


def retry_run(
    run: Run | UUID | str,
    *,
    user: AnyUser | None = None,
    deadline: timedelta | datetime | None = None,
) -> Run:
    """Replay an ended run that did not complete: failed, timed-out and cut-short steps
    get fresh attempts, compensated work is done again in a new generation, a run whose
    compensation failed runs it again. Its old error and deadline are cleared; give
    ``deadline`` for a new one. See :func:`workflows.engine.verbs.retry.retry_run` for
    when it is refused."""
    run_id = run_id_of(run)
    retry.retry_run(run_id, user=user, deadline=deadline)
    return Run.objects.get(pk=run_id)


def pause_run(run: Run | UUID | str, *, reason: str = "", user: AnyUser | None = None) -> Run:
    """Pause a run: nothing new starts, running work finishes and is recorded, timers
    that come due wait for :func:`resume_run` (and then fire once)."""
    check_text(reason, field="pause reason")
    run_id = run_id_of(run)
    pause.pause_run(run_id, reason=reason, user=user)
    return Run.objects.get(pk=run_id)


def resume_run(run: Run | UUID | str, *, user: AnyUser | None = None) -> Run:
    """Resume a paused run: what ended meanwhile is settled, its work starts again."""
    run_id = run_id_of(run)
    pause.resume_run(run_id, user=user)
    return Run.objects.get(pk=run_id)


def terminate_run(run: Run | UUID | str, *, reason: str = "", user: AnyUser | None = None) -> Run:
    """Stop a run (and its children) at once, without compensation; running attempts
    lose their lease. :func:`cancel_run` is the verb that compensates."""
    check_text(reason, field="terminate reason")
    run_id = run_id_of(run)
    terminate.terminate_run(run_id, reason=reason, user=user)
    terminate_children(run_id)
    return Run.objects.get(pk=run_id)


def rerun_from(
    run: Run | UUID | str,
    step: Step | int | str,
    *,
    reason: str = "",
    user: AnyUser | None = None,
    deadline: timedelta | datetime | None = None,
) -> Run:
    """Run ``step`` (a step, its id, or its name) and everything downstream of it again.

    For every ended run; upstream outputs are kept, the reset steps get new idempotency
    keys and fresh attempts, the old error and deadline are cleared (``deadline``: a new
    one). See :func:`workflows.engine.verbs.rerun.rerun_from` for when it is refused.
    """
    check_text(reason, field="rerun reason")
    run_id = run_id_of(run)
    if isinstance(step, str) and not step.isdigit():
        name = step
    else:
        target = step_of(step if isinstance(step, Step) else int(step))
        if target.run_id != run_id:
            raise InvalidInput(f"step {target.pk} belongs to run {target.run_id}, not {run_id}")
        name = target.name
    rerun.rerun_from(run_id, name, reason=reason, user=user, deadline=deadline)
    return Run.objects.get(pk=run_id)


def change_priority(run: Run | UUID | str, priority: int, *, user: AnyUser | None = None) -> Run:
    """Give a run (and its live child runs) another priority, -1000 to 1000.

    The run's unstarted steps, fan-out items and compensations whose node declares no
    priority of its own take the new one; a queued run moves in its workflow's queue.
    The history records who changed it (``run.priority_changed``). Refused for a run
    that has ended (:class:`InvalidTransition`) and for a priority out of range or not
    an integer (:class:`InvalidInput`). Children are changed after the parent, each in
    its own transition (a child is never locked while its parent is held); a child that
    ends meanwhile is left as it is.
    """
    _check_priority(priority)
    run_id = run_id_of(run)
    set_priority(run_id, priority, user=user)
    _change_children(run_id, priority, user)
    return Run.objects.get(pk=run_id)


def _change_children(run_id: UUID, priority: int, user: AnyUser | None) -> None:
    live = PRIORITY.accepts - {RunStatus.QUEUED, RunStatus.BLOCKED}  # never a child's
    for child_id in Run.objects.filter(parent_run_id=run_id, status__in=live).values_list(
        "id", flat=True
    ):
        try:
            set_priority(child_id, priority, user=user)
        except InvalidTransition:  # it ended meanwhile
            continue
        _change_children(child_id, priority, user)
