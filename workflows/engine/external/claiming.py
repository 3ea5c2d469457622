"""Claiming external steps: up to ``limit`` ready units of the routes a worker serves.

The same compare-and-set ``ready → running`` as an in-process claim
(:func:`~workflows.engine.claims.begin_attempt`), made for each unit in turn in one
transaction: priority order, oldest first within a priority, limits and budgets
admitted as for any claim. The units are read ``FOR UPDATE SKIP LOCKED`` on PostgreSQL,
so two workers claiming at once take disjoint units, and each unit's claim restates
``ready``, so on SQLite too exactly one claimer wins a unit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import reduce
from operator import or_
from uuid import UUID

from django.db.models import Q, QuerySet

from workflows.definitions import Task, Workflow, registry
from workflows.definitions.limits import Route
from workflows.engine.claims import begin_attempt, lease_of, record_hold
from workflows.engine.events import EventLog
from workflows.engine.lease import Lease
from workflows.engine.limits.admission import Hold, admit
from workflows.engine.scope import unlocked_scope
from workflows.engine.sql.claim_reads import ClaimRow
from workflows.engine.sql.connection import engine_alias
from workflows.engine.transaction import transition
from workflows.engine.work_kinds import STEP
from workflows.errors import DefinitionMissing
from workflows.models import Step
from workflows.status import StepStatus

# How many times one claim reads further units to replace those it passed over.
PASSES = 4


@dataclass(frozen=True)
class ExternalClaim:
    """An attempt of an external step a claim began: its lease (what fences its
    outcome), when the lease expires and when its run's deadline is, both on the
    database clock."""

    lease: Lease
    lease_expires_at: datetime
    deadline: datetime | None


@dataclass(frozen=True)
class ClaimOutcome:
    """What one claim transaction did: the attempts it began, and the runs it found
    without a registered definition (failed afterwards, each in its own transition)."""

    claims: list[ExternalClaim]
    missing: list[tuple[UUID, DefinitionMissing]]


def external_routes(queues: Iterable[str], capabilities: Iterable[str]) -> list[Route]:
    """The external routes of registered workflows a worker claiming ``queues`` with
    ``capabilities`` may serve (every version, so older runs' steps are found too)."""
    queues, capabilities = frozenset(queues), frozenset(capabilities)
    return sorted(
        {
            route
            for workflow in registry.all()
            for route in workflow.routes()
            if route.served_externally_by(queues, capabilities)
        },
        key=lambda route: (route.queue, route.requires_text),
    )


@transition
def claim_external_units(routes: list[Route], owner: str, limit: int) -> ClaimOutcome:
    """Begin an attempt of up to ``limit`` ready external steps of ``routes`` for ``owner``.

    Reads (and on PostgreSQL locks) only as many units as it still needs, so a worker
    claiming three does not hide a fourth from a worker claiming beside it; a unit it
    passes over (a limit holds it, its definition is gone or no longer external) is
    replaced by the next one, at most :data:`PASSES` times.
    """
    claims: list[Lease] = []
    missing: list[tuple[UUID, DefinitionMissing]] = []
    passed: set[int] = set()
    with unlocked_scope() as scope:  # each unit read SKIP LOCKED; its run is not locked
        for _ in range(PASSES):
            wanted = limit - len(claims)
            candidates = _candidates(routes, wanted, passed) if wanted else []
            if not candidates:
                break
            for unit_id in candidates:
                lease = _claim_one(unit_id, owner, scope.events, missing)
                if lease is None:
                    passed.add(unit_id)
                else:
                    claims.append(lease)
    return ClaimOutcome(_with_moments(claims), missing)


def _claim_one(
    unit_id: int,
    owner: str,
    events: EventLog,
    missing: list[tuple[UUID, DefinitionMissing]],
) -> Lease | None:
    """Claim the candidate ``unit_id``; ``None`` when it is passed over."""
    row = STEP.read_claim(unit_id, preferred=False)
    if row is None or row.status != StepStatus.READY:
        return None  # claimed by another worker since the candidates were read
    try:
        workflow = registry.get(row.workflow_name, row.workflow_version)
    except DefinitionMissing as gone:
        missing.append((row.run_id, gone))
        return None
    return _begin(row, workflow, owner, events)


def ready_external(routes: list[Route]) -> bool:
    """Whether a claim of ``routes`` would find a unit now: a plain read, no lock, so
    that a worker polling an empty queue costs no write transaction (on SQLite, no
    wait for the write lock)."""
    return bool(routes) and _ready(routes).exists()


def _ready(routes: list[Route]) -> QuerySet[Step]:
    """The ready, unheld external steps of ``routes`` whose runs may start them, best
    first: highest priority, then oldest."""
    on_route = reduce(or_, (Q(queue=route.queue, requires=route.requires_text) for route in routes))
    return (
        Step.objects.using(engine_alias())
        .filter(on_route, status=StepStatus.READY, held_on="", run__status__in=STEP.runs_while)
        .order_by("-priority", "updated_at", "id")
    )


def _candidates(routes: list[Route], count: int, passed: set[int]) -> list[int]:
    """The ``count`` best units of :func:`_ready` but those ``passed`` over, locked
    ``SKIP LOCKED`` on PostgreSQL."""
    if not routes:
        return []
    locked = _ready(routes).exclude(pk__in=passed).select_for_update(skip_locked=True, of=("self",))
    return list(locked.values_list("id", flat=True)[:count])


def _begin(row: ClaimRow, workflow: type[Workflow], owner: str, events: EventLog) -> Lease | None:
    """Admit ``row`` and begin its attempt for ``owner``; ``None`` when a limit holds it,
    it is not an external task of its definition, or another claimer took it."""
    node = workflow.nodes.get(row.step_name)
    if not isinstance(node, Task) or not node.external:
        return None  # the row's route says external, its definition no longer does
    admitted = admit(STEP, row, node, workflow)
    if isinstance(admitted, Hold):
        record_hold(STEP, row, admitted, events)
        return None
    template = lease_of(STEP, row, owner, workflow, node, admitted.refusal)
    return begin_attempt(template, row, events)


def _with_moments(leases: list[Lease]) -> list[ExternalClaim]:
    """Each lease with its expiry and its run's deadline, read back in one statement."""
    if not leases:
        return []
    moments = {
        pk: (expires, deadline)
        for pk, expires, deadline in Step.objects.using(engine_alias())
        .filter(pk__in=[lease.unit_id for lease in leases])
        .values_list("id", "lease_expires_at", "run__deadline")
    }
    claims = []
    for lease in leases:
        expires, deadline = moments[lease.unit_id]
        assert expires is not None, "a claim sets the lease's expiry"
        claims.append(ExternalClaim(lease, expires, deadline))
    return claims
