"""What a run's history says: the payloads of its events of one type."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from workflows.models import Event, Run


def payloads(run: Run | UUID, type: str) -> list[dict[str, Any]]:
    """The payloads of the run's events of ``type``, oldest first."""
    run_id = run.pk if isinstance(run, Run) else run
    return list(Event.objects.filter(run_id=run_id, type=type).values_list("payload", flat=True))
