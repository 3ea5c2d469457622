"""A run's kept signals: the oldest one of some names not yet consumed, and consuming it.

Shared by the two consumers of signals, a ``WaitForSignal`` step and a handler's
``Await`` (:mod:`~workflows.engine.nodes.wait_for_signal`,
:mod:`~workflows.engine.nodes.awaits`), so both take a signal sent early the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from uuid import UUID

from django.utils import timezone

from workflows.engine.sql.updates import cas_update
from workflows.errors import StaleState
from workflows.models import Signal


def oldest_kept(run_id: UUID, names: Iterable[str]) -> Signal | None:
    """The oldest signal of ``names`` that the run keeps unconsumed, if any."""
    return (
        Signal.objects.filter(run_id=run_id, name__in=list(names), consumed_by__isnull=True)
        .order_by("id")
        .first()
    )


def consume(signal: Signal, step_id: int) -> None:
    """Compare-and-set the signal from unconsumed to consumed by ``step_id``."""
    consumed_at = timezone.now()
    if not cas_update(
        Signal,
        signal.pk,
        version=signal.version,
        where={"consumed_by_id": None},
        consumed_by_id=step_id,
        consumed_at=consumed_at,
    ):
        raise StaleState(f"signal {signal.pk} was consumed by another step")
    signal.consumed_by_id, signal.consumed_at = step_id, consumed_at
    signal.version += 1
