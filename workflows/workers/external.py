"""The verbs of workers outside the process: claim external steps, then heartbeat,
complete, fail and log each attempt by its lease token.

``Task(external=True)`` has no Python handler: a service in any language does its work
over ``/api/work/`` (:mod:`workflows.api.work`), which calls these; a Python program may
call them directly. Each verb is one or two engine transitions
(:mod:`workflows.engine.external`); every refusal of a lease is the same
:class:`~workflows.LeaseLost`, whatever check failed.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db.models.functions import Length

from workflows.conf import workflow_settings
from workflows.definitions.limits import name_problems
from workflows.engine import Lease
from workflows.engine.dispatch import external_topic
from workflows.engine.external import (
    ExternalClaim,
    claim_external_units,
    complete_external_lease,
    fail_external_lease,
    heartbeat_external_lease,
    lease_token,
)
from workflows.engine.external.claiming import external_routes, ready_external
from workflows.engine.external.leases import report_external_lease
from workflows.engine.failures import AttemptTimedOut
from workflows.engine.outcomes import fail_attempt
from workflows.engine.scope import fail_missing_definition
from workflows.engine.sql.rows import completed_outputs
from workflows.engine.tags import TagsRefused
from workflows.engine.telemetry import FrameBudget
from workflows.engine.variables import VariablesRefused
from workflows.errors import InvalidInput, PermanentError
from workflows.models import Frame
from workflows.queries.long_poll import long_poll
from workflows.status import FailureClass, FrameStream
from workflows.tags import patch_problem
from workflows.text.owners import EXTERNAL_OWNER
from workflows.validation import check_json
from workflows.variables import object_problem
from workflows.workers.telemetry import AttemptTelemetry

# The longest a claim may wait for work (seconds): past it proxies and clients time out.
MAX_WAIT = 60.0
# The most units one claim may take.
MAX_LIMIT = 100
# A worker's name, as it appears in lease columns: printable, no spaces, not too long.
_WORKER = re.compile(r"^[A-Za-z0-9_.:@/-]{1,120}$")
# The failure classes an external worker may name (the rest are the engine's to decide).
WORKER_CLASSES = (FailureClass.TRANSIENT, FailureClass.PERMANENT, FailureClass.TIMEOUT)


@dataclass(frozen=True)
class ExternalJob:
    """One claimed attempt of an external step, and everything its worker needs.

    ``lease``: the token every later call presents (opaque, signed; useless once the
    attempt is over). ``input``: the run's input; ``steps``: the outputs of the step's
    completed upstream steps, by name. ``attempt`` counts within the step's current
    round, as every surface does; ``idempotency_key`` is stable across the attempts of
    the step (send it to the systems the work calls). ``lease_expires_at``: heartbeat
    before it; ``deadline``: when the run must have ended, if it must.
    ``traceparent``: the W3C context of the run's start ("" when not traced), for the
    worker's own spans to join the run's trace (docs/operations/traces.md).
    """

    lease: str
    run: UUID
    workflow: str
    workflow_version: int
    step: str
    queue: str
    attempt: int
    max_attempts: int
    idempotency_key: str
    input: dict[str, Any]
    steps: dict[str, Any]
    lease_expires_at: datetime
    deadline: datetime | None
    timeout: float
    traceparent: str = ""


def claim_external(
    queues: Iterable[str] | str,
    *,
    worker: str,
    limit: int = 1,
    capabilities: Iterable[str] = (),
    wait: float = 0,
) -> list[ExternalJob]:
    """Claim up to ``limit`` ready external steps of ``queues`` for ``worker``.

    Highest priority first, then oldest; limits and budgets admit each as for any
    claim; a worker gets only steps whose ``requires`` its ``capabilities`` cover. With
    ``wait`` (seconds, at most 60) an empty answer waits until work is made ready on
    one of the queues (woken on commit) or the time is up. Bad arguments raise
    :class:`~workflows.InvalidInput` naming the problem.
    """
    queue_names = _names("queues", [queues] if isinstance(queues, str) else list(queues))
    capability_names = _names("capabilities", list(capabilities), allow_empty=True)
    _check_claim(worker, limit, wait)
    routes = external_routes(queue_names, capability_names)
    owner = EXTERNAL_OWNER + worker

    def claimed() -> list[ExternalJob]:
        if not ready_external(routes):  # a read first: finding nothing writes nothing
            return []
        outcome = claim_external_units(routes, owner, limit)
        for run_id, missing in outcome.missing:
            fail_missing_definition(run_id, missing)
        return _jobs(outcome.claims)

    return long_poll(
        [external_topic(queue) for queue in queue_names], claimed, until=bool, timeout=wait
    )


def _names(label: str, names: Sequence[object], *, allow_empty: bool = False) -> list[str]:
    if not names and not allow_empty:
        raise InvalidInput(f"{label} must name at least one queue")
    problems = [problem for name in names for problem in name_problems(f"each of {label}", name)]
    if problems:
        raise InvalidInput("; ".join(problems), field=label)
    return [str(name) for name in names]


def _check_claim(worker: object, limit: object, wait: object) -> None:
    if not isinstance(worker, str) or not _WORKER.match(worker):
        raise InvalidInput(
            "worker must be 1-120 letters, digits or '_ . : @ / -', got " + repr(worker),
            field="worker",
        )
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(
            f"limit must be an integer from 1 to {MAX_LIMIT}, got {limit!r}", field="limit"
        )
    if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 <= wait <= MAX_WAIT:
        raise InvalidInput(f"wait must be 0 to {MAX_WAIT:g} seconds, got {wait!r}", field="wait")


def _jobs(claims: list[ExternalClaim]) -> list[ExternalJob]:
    """The jobs of the attempts a claim began; one a limit let start only to fail is
    failed here (as an in-process worker fails it) and not handed out."""
    jobs = []
    for claim in claims:
        lease = claim.lease
        if lease.refusal is not None:
            fail_attempt(lease, lease.refusal)
            continue
        upstream = list(lease.workflow.graph.upstream[lease.step_name])
        jobs.append(
            ExternalJob(
                lease=lease_token(lease.run_id, lease.unit_id, lease.attempt, lease.owner),
                run=lease.run_id,
                workflow=lease.workflow.name,
                workflow_version=lease.workflow.version,
                step=lease.step_name,
                queue=lease.workflow.route_of(lease.step_name).queue,
                attempt=lease.attempt_in_round,
                max_attempts=lease.max_attempts - lease.attempts_before,
                idempotency_key=lease.idempotency_key,
                input=lease.run_input,
                steps=completed_outputs(lease.run_id, upstream),
                lease_expires_at=claim.lease_expires_at,
                deadline=claim.deadline,
                timeout=lease.node.effective_timeout.total_seconds(),
                traceparent=lease.traceparent,
            )
        )
    return jobs


def heartbeat_external(
    lease: str,
    *,
    progress: float | Sequence[float] | None = None,
    message: str = "",
) -> datetime:
    """Extend ``lease`` by its step's timeout (and report progress); the new expiry.

    ``progress``: how much is done, a number, or ``(done, total)``; ``message`` says
    what (shown on the run page). Raises :class:`~workflows.LeaseLost` for a stale,
    forged or malformed lease, writing nothing, and :class:`~workflows.RunCancelled`
    (a ``LeaseLost``) when the run asks its work to stop: the attempt is then over.
    """
    report = None
    if progress is not None or message:
        done, total = _progress(progress)
        report = _reporting(lambda telemetry: telemetry.progress(done, total, message))
    return heartbeat_external_lease(lease, report)


def _progress(progress: float | Sequence[float] | None) -> tuple[float, float | None]:
    if progress is None:
        return 0, None
    if isinstance(progress, list | tuple) and len(progress) == 2:
        return progress[0], progress[1]
    if isinstance(progress, int | float) and not isinstance(progress, bool):
        return progress, None
    raise InvalidInput(
        f"progress must be a number or [done, total], got {progress!r}", field="progress"
    )


def log_external(lease: str, text: str, stream: str = "stdout") -> None:
    """Append ``text`` to the attempt's log (``stream``: stdout, stderr or event),
    within the attempt's bound on frames; the lease is not extended."""
    if stream not in FrameStream.values:
        raise InvalidInput(
            f"stream must be one of {', '.join(FrameStream.values)}, got {stream!r}",
            field="stream",
        )
    if not isinstance(text, str):
        raise InvalidInput(f"text must be a string, got {type(text).__name__}", field="text")
    report_external_lease(lease, _reporting(lambda telemetry: telemetry.log(text, stream)))


def _reporting(call: Callable[[AttemptTelemetry], None]) -> Callable[[Lease], None]:
    """What writes one report for a lease, inside the transition that checked it: the
    in-process worker's telemetry, flushed at once, its frame bound read from the table
    (this attempt's frames so far)."""

    def report(lease: Lease) -> None:
        telemetry = AttemptTelemetry(lease, lambda: None, _attempt_budget(lease))
        try:
            call(telemetry)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
        telemetry.flush()

    return report


def _attempt_budget(lease: Lease) -> FrameBudget:
    """The frame bound of ``lease``'s attempt, with the frames it has written so far
    (their sizes in characters: the text as stored)."""
    kept = Frame.objects.filter(step_id=lease.step_id, attempt=lease.attempt).order_by("seq")
    budget = FrameBudget(
        workflow_settings.FRAMES_PER_ATTEMPT, workflow_settings.FRAME_BYTES_PER_ATTEMPT
    )
    budget.kept = deque(kept.values_list("seq", Length("text")))
    budget.kept_bytes = sum(size for _, size in budget.kept)
    return budget


def complete_external(
    lease: str,
    output: Any,
    *,
    variables: dict[str, Any] | None = None,
    tags: dict[str, str | None] | None = None,
) -> bool:
    """Record ``output`` (JSON) as the attempt's result and move the run on.

    Returns ``False`` when the attempt had already completed with the same output (a
    retried request: nothing written again). Another output for a completed attempt,
    or any stale lease, raises :class:`~workflows.LeaseLost`; an output no database
    stores unchanged raises :class:`~workflows.InvalidInput`.

    ``variables``: a JSON merge patch of the run's variables, committed with the
    output as a Python handler's ``ctx.set_variables`` is (a ``run.variables_set``
    event naming the step). A patch that is not a JSON object of storable JSON, or
    that would take the variables past ``MAX_VARIABLES_BYTES``, raises
    :class:`~workflows.InvalidInput` (``field "variables"``) and nothing is written:
    the attempt still holds its lease.

    ``tags``: a patch of the run's tags (a value ``None`` removes its key), committed
    with the output as a Python handler's ``ctx.set_tags`` is (a ``run.tags_set`` event
    naming the step), fenced by the lease like the output. A bad key or value, or a
    patch that would give the run more than 32 tags as committed by then, raises
    :class:`~workflows.InvalidInput` (``field "tags"``, naming the tag) and nothing is
    written: the attempt still holds its lease.
    """
    checked = check_json(output, field="output", error=InvalidInput)
    patches = []
    if variables is not None:
        problem = object_problem(variables, field="variables")
        if problem is not None:
            raise InvalidInput(problem, field="variables")
        patches.append(variables)
    tag_patches = [] if tags is None else [_checked_tag_patch(tags)]
    try:
        return not complete_external_lease(lease, checked, patches, tag_patches).duplicate
    except VariablesRefused as refused:
        raise InvalidInput(str(refused), field="variables") from None
    except TagsRefused as refused:
        raise InvalidInput(str(refused), field="tags") from None


def _checked_tag_patch(tags: Any) -> dict[str, str | None]:
    """``tags`` as a patch of a run's tags, or :class:`InvalidInput` naming the tag;
    the 32-tag limit is checked at the commit, against the tags committed by then."""
    found = patch_problem(tags, removals=True)
    if found is not None:
        problem, tag = found
        raise InvalidInput(f"tags: {problem}", field="tags", tag=tag)
    return dict(tags)


def fail_external(
    lease: str,
    error: str,
    *,
    permanent: bool = False,
    failure_class: str | None = None,
) -> str:
    """Record the attempt as failed with ``error`` (a message); returns the step's new
    status, ``retry_scheduled`` or ``failed``.

    ``permanent`` (or ``failure_class="permanent"``): not retried. ``failure_class``:
    ``transient`` (the default), ``permanent`` or ``timeout``; the task's
    ``Retry(retry_on=...)`` decides whether the class is retried, as for any task.
    """
    if not isinstance(error, str) or not error.strip():
        raise InvalidInput("error must be a non-empty message", field="error")
    chosen = FailureClass.PERMANENT if permanent else failure_class or FailureClass.TRANSIENT
    if chosen not in WORKER_CLASSES:
        raise InvalidInput(
            f"failure_class must be one of {', '.join(WORKER_CLASSES)}, got {chosen!r}",
            field="failure_class",
        )
    return fail_external_lease(lease, _failure(chosen, error[:4000]))


class ExternalWorkFailed(Exception):
    """An external worker said its attempt failed (class ``transient``)."""


class ExternalWorkRefused(PermanentError):
    """An external worker said its attempt failed for good (class ``permanent``)."""


class ExternalWorkTimedOut(AttemptTimedOut):
    """An external worker said its attempt ran out of time (class ``timeout``)."""


def _failure(failure_class: str, message: str) -> Exception:
    if failure_class == FailureClass.PERMANENT:
        return ExternalWorkRefused(message)
    if failure_class == FailureClass.TIMEOUT:
        return ExternalWorkTimedOut(message)
    return ExternalWorkFailed(message)
