"""Starting a run: validate, create the run and its steps, release the roots."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.db import IntegrityError
from django.utils import timezone

from workflows.definitions import Task, Workflow, registry
from workflows.engine.advance import Advancer
from workflows.engine.db import transition
from workflows.engine.dispatch import enqueue
from workflows.engine.events import EventLog
from workflows.errors import IdempotencyConflict, InvalidInput
from workflows.models import Run, Step
from workflows.status import RunStatus


def input_fingerprint(data: dict[str, Any]) -> str:
    """A stable hash of JSON input, for idempotent starts."""
    try:
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"input is not JSON-serialisable: {exc}") from exc
    return hashlib.sha256(canonical.encode()).hexdigest()


def start_run(
    workflow: str | type[Workflow],
    input: dict[str, Any] | None = None,
    *,
    idempotency_key: str | None = None,
    business_key: str | None = None,
    user: Any = None,
) -> Run:
    """Start a run of ``workflow`` (a registered name, latest version, or a class).

    With an ``idempotency_key`` seen before for this workflow, the existing run is
    returned when the input is the same, and :class:`IdempotencyConflict` raised when
    it differs; of two concurrent starts with one key, one creates the run and the
    other returns it.
    """
    definition = registry.resolve(workflow)
    data = definition.check_input(input)
    fingerprint = input_fingerprint(data)
    if idempotency_key is not None:
        existing = _existing(definition, idempotency_key, fingerprint)
        if existing is not None:
            return existing
    try:
        return _create(definition, data, fingerprint, idempotency_key, business_key or "", user)
    except IntegrityError:
        if idempotency_key is None:
            raise
        existing = _existing(definition, idempotency_key, fingerprint)
        if existing is None:
            raise
        return existing


def _existing(definition: type[Workflow], key: str, fingerprint: str) -> Run | None:
    run = Run.objects.filter(workflow_name=definition.name, idempotency_key=key).first()
    if run is not None and run.input_hash != fingerprint:
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
    fingerprint: str,
    idempotency_key: str | None,
    business_key: str,
    user: Any,
) -> Run:
    run = Run.objects.create(
        workflow_name=definition.name,
        workflow_version=definition.version,
        snapshot=definition.snapshot(),
        status=RunStatus.RUNNING,
        input=data,
        input_hash=fingerprint,
        idempotency_key=idempotency_key,
        business_key=business_key,
        created_by=user if getattr(user, "is_authenticated", False) else None,
        started_at=timezone.now(),
    )
    Step.objects.bulk_create(
        Step(
            run=run,
            name=name,
            kind=node.kind,
            max_attempts=node.effective_retry.max_attempts if isinstance(node, Task) else 1,
        )
        for name, node in definition.nodes.items()
    )
    events = EventLog()
    events.add(
        run.pk,
        "run.started",
        workflow=definition.name,
        version=definition.version,
        idempotency_key=idempotency_key,
    )
    advancer = Advancer(run, definition, events)
    advancer.start()
    events.flush()
    enqueue(advancer.ready_step_ids)
    run.status, run.version = advancer.run.status, advancer.run.version
    return run
