"""Setting a run's business key after its start: an operator verb.

A run is often started before the key that names it is known (the order number comes
back from the shop a step later). ``set_business_key`` gives it one: a compare-and-set
of ``Run.business_key`` under the run's lock, with the event ``run.business_key_set``.

- Idempotent: the key the run holds already writes nothing and records nothing.
- Only a run not over takes a key (:data:`~workflows.engine.guards.BUSINESS_KEY`): an
  ended run's key is its history (its budgets counted under it, its events named it).
- For a workflow with ``unique_business_key`` (copied to ``Run.unique_business_key`` at
  the start), a key another live run holds is refused with
  :class:`~workflows.errors.BusinessKeyInUse` by the partial unique index; of two
  setters racing for one key, the database lets exactly one through
  (:mod:`workflows.engine.business_keys`).

The key's text is checked by the service (:mod:`workflows.services.run_metadata`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from django.db import IntegrityError

from workflows.engine.business_keys import key_refusal
from workflows.engine.events import actor
from workflows.engine.guards import BUSINESS_KEY
from workflows.engine.scope import run_scope
from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.updates import cas_update
from workflows.engine.transaction import transition
from workflows.errors import StaleState
from workflows.models import Run

if TYPE_CHECKING:
    from workflows.permissions import AnyUser

__all__ = ["set_business_key"]


@transition
def set_business_key(run_id: UUID, key: str, *, user: AnyUser | None = None) -> bool:
    """Give the run ``key``; whether this call changed it (the same key again: no).

    Loses a race to any transition of the run (the compare-and-set restates the status
    and version read under the lock: :class:`StaleState`), and to another run of a
    workflow with unique keys that took the key first (:class:`BusinessKeyInUse`).
    """
    with run_scope(run_id, needs_definition=False) as scope:
        run = scope.run
        BUSINESS_KEY.check(run_id, run.status)
        previous = run.business_key
        if previous == key:
            return False
        try:
            changed = cas_update(
                Run,
                run.pk,
                version=run.version,
                where={"status": run.status},
                business_key=key,
                updated_at=db_now(),
            )
        except IntegrityError as error:
            # Nothing more is written: the refusal leaves the transition, which rolls back.
            refusal = key_refusal(error, key=key, workflow=run.workflow_name)
            if refusal is None:
                raise
            raise refusal from error
        if not changed:
            raise StaleState(
                f"run {run.pk} changed while its business key was set", run=str(run.pk)
            )
        run.version += 1
        run.business_key = key
        change: dict[str, Any] = {"from": previous, "to": key}
        scope.events.add(run.pk, "run.business_key_set", by=actor(user), **change)
        return True
