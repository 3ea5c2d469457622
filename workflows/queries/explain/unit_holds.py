"""What holds leased work, ready or running: a worker holds its lease, or ready work
has not started, and why, most specific first: no running worker serves its route
(``worker``), a limit holds it (``concurrency``, ``rate``, ``budget``, from the
``held_on`` the claim wrote), else it waits for a worker to pick it up (``dispatch``),
or for a worker outside the process to claim it (``external``: the work of a
``Task(external=True)``, which no worker of the cluster ever serves)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from workflows.conf import workflow_settings
from workflows.engine.work_kinds import COMPENSATION
from workflows.holds import HoldKind
from workflows.queries.explain.reading import Reading, Unit
from workflows.queries.explain.records import WaitingOn

__all__ = ["lease", "ready"]


def _entry(kind: HoldKind, reading: Reading, unit: Unit, **details: Any) -> WaitingOn:
    """An entry about ``unit``: its step, which unit it is, then ``details``."""
    return WaitingOn(
        kind,
        reading.step_names.get(unit.step_id),
        {"unit": unit.kind.name, "item": unit.item, **details},
    )


def lease(reading: Reading, unit: Unit) -> WaitingOn:
    """A worker runs the unit. Forward work of a cancelling run was asked to stop
    (``cancel_requested_at``) and stops at its next heartbeat: ``heartbeat_at`` is when
    its lease was last taken or renewed (its expiry less the node's timeout)."""
    forward = unit.kind is not COMPENSATION
    node = reading.node(unit.step_id)
    renewed = (
        unit.lease_expires_at - node.effective_timeout
        if node is not None and unit.lease_expires_at is not None and forward
        else None
    )
    return _entry(
        HoldKind.LEASE,
        reading,
        unit,
        worker=unit.lease_owner,
        expires_at=unit.lease_expires_at,
        expired=unit.lease_expired,
        attempt=unit.attempt,
        max_attempts=unit.max_attempts,
        heartbeat_at=renewed,
        cancel_requested_at=reading.cancel_requested_at if forward else None,
    )


def ready(reading: Reading, unit: Unit) -> WaitingOn:
    """Why ready work has not started, most specific first: no live worker may run it,
    a limit holds it (its ``held_on``, ``<kind>:<key>``, written by the claim), or it
    waits for a worker to pick it up. External work waits for an external worker (after
    a limit, which its claims admit it by as any claim): the live workers of the
    cluster say nothing about it."""
    route = unit.route
    if not route.external and not reading.served(route):
        return _worker(reading, unit)
    limit, _, key = unit.held_on.partition(":")
    if (hold := _HELD.get(limit)) is not None:
        return hold(reading, unit, key)
    if route.external:
        return _external(reading, unit)
    return _entry(
        HoldKind.DISPATCH, reading, unit, since=unit.updated_at, undispatched=unit.undispatched
    )


def _worker(reading: Reading, unit: Unit) -> WaitingOn:
    route = unit.route
    return _entry(
        HoldKind.WORKER,
        reading,
        unit,
        since=unit.updated_at,
        queue=route.queue,
        requires=sorted(route.requires),
        message=f"waiting for a worker of queue {route.queue!r}" + _capabilities(route.requires),
    )


def _external(reading: Reading, unit: Unit) -> WaitingOn:
    route = unit.route
    names = sorted(route.requires)
    return _entry(
        HoldKind.EXTERNAL,
        reading,
        unit,
        since=unit.updated_at,
        queue=route.queue,
        requires=names,
        capabilities=_capabilities(names).removeprefix(" with "),
    )


def _capabilities(names: Iterable[str]) -> str:
    names = sorted(names)
    if not names:
        return ""
    return f" with capabilit{'y' if len(names) == 1 else 'ies'} {', '.join(names)}"


def _concurrency(reading: Reading, unit: Unit, key: str) -> WaitingOn:
    node = reading.node(unit.step_id)
    limit = node.max_concurrent if node is not None else None
    held = reading.held_slots.get(key)
    counted = f" ({held} of {limit} held)" if held is not None and limit is not None else ""
    return _entry(
        HoldKind.CONCURRENCY,
        reading,
        unit,
        since=unit.updated_at,
        key=key,
        limit=limit,
        held=held,
        message=f"waiting for a free place under concurrency limit {key}{counted}",
    )


def _rate(reading: Reading, unit: Unit, key: str) -> WaitingOn:
    return _entry(
        HoldKind.RATE,
        reading,
        unit,
        since=unit.updated_at,
        key=key,
        limit=_rate_limit(reading, unit, key),
        due_at=reading.releases.get((unit.step_id, unit.item)),
        message=f"delayed by rate limit {key}",
    )


def _rate_limit(reading: Reading, unit: Unit, key: str) -> str | None:
    """The limit behind rate key ``task:<workflow>.<step>`` or ``queue:<name>``."""
    if key.startswith("queue:"):
        return workflow_settings.QUEUE_RATE_LIMITS.get(key.removeprefix("queue:"))
    node = reading.node(unit.step_id)
    return node.rate_limit if node is not None else None


def _budget(reading: Reading, unit: Unit, dimension: str) -> WaitingOn:
    return _entry(
        HoldKind.BUDGET,
        reading,
        unit,
        since=unit.updated_at,
        dimension=dimension,
        message=f"held: budget {dimension} exhausted",
    )


# What a ready unit's ``held_on`` (``<kind>:<key>``) says holds it, by the kind.
_HELD: dict[str, Callable[[Reading, Unit, str], WaitingOn]] = {  # one per LIMIT_KINDS
    HoldKind.CONCURRENCY: _concurrency,
    HoldKind.RATE: _rate,
    HoldKind.BUDGET: _budget,
}
