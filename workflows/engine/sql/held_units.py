"""Ready work held by a limit: finding the best held units, releasing a budget's holds.

A held unit is a ``ready`` step or fan-out item whose ``held_on`` column names the limit
it waits for (``concurrency:<key>``, ``rate:<key>``, ``budget:<dimension>``). When it is
held and when it is let go is decided in :mod:`workflows.engine.limits`; these are the
statements that find such units and clear their holds.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from django.db import models

from workflows.engine.sql.connection import engine_connection
from workflows.engine.sql.execute import fetch_all
from workflows.engine.sql.identifiers import table
from workflows.models import FanOutItem, Run, Step
from workflows.status import StepStatus


class HeldUnit(NamedTuple):
    """A ready unit held by a limit, with what a compare-and-set and a dispatch need."""

    pk: int
    version: int
    queue: str
    requires: str


def best_held(model: type[models.Model], held_on: str, count: int) -> list[HeldUnit]:
    """The ``count`` best ready units of ``model`` held on ``held_on``: highest priority,
    then oldest (``updated_at``), the order in which the queue would start them.

    A plain read: the caller clears each hold by a compare-and-set restating ``ready``
    and the hold, so a unit claimed or released meanwhile is left alone.
    """
    sql = (
        f"SELECT id, version, queue, requires FROM {table(model)} WHERE status = %s "
        "AND held_on = %s ORDER BY priority DESC, updated_at, id LIMIT %s"
    )
    rows = fetch_all(engine_connection(), sql, [StepStatus.READY, held_on, count])
    return [HeldUnit(*row) for row in rows]


class ReleasedUnit(NamedTuple):
    """A unit whose hold was just cleared, with what its dispatch and its order need."""

    pk: int
    queue: str
    requires: str
    priority: int


def release_workflow_holds(
    model: type[models.Model], held_on: str, workflow_name: str, business_key: str = ""
) -> list[ReleasedUnit]:
    """Clear the hold ``held_on`` of every ready unit of ``model`` (steps or fan-out
    items) in a run of ``workflow_name`` (with ``business_key``, when given); return the
    units cleared.

    Set-based compare-and-set: the ``UPDATE`` restates ``ready`` and the hold, bumps
    ``version`` and returns the rows it changed, so a unit a worker claimed meanwhile is
    left alone and not returned. ``updated_at`` is kept: a released unit keeps its place
    among the ready work of its priority.
    """
    units = table(model)
    params: list[Any] = [StepStatus.READY.value, held_on, workflow_name]
    by_key = ""
    if business_key:
        by_key = " AND r.business_key = %s"
        params.append(business_key)
    sql = (
        f"UPDATE {units} SET held_on = '', version = version + 1 "
        f"WHERE status = %s AND held_on = %s AND EXISTS (SELECT 1 FROM {_owner_run(model, units)} "
        f"AND r.workflow_name = %s{by_key}) RETURNING id, queue, requires, priority"
    )
    return [ReleasedUnit(*row) for row in fetch_all(engine_connection(), sql, params)]


def _owner_run(model: type[models.Model], units: str) -> str:
    """``FROM … WHERE`` finding the run ``r`` of each row of ``units`` (``model``'s table).
    The target of the ``UPDATE`` is named by its table: PostgreSQL's ``UPDATE`` takes an
    alias, SQLite's does not."""
    runs = table(Run)
    if model is Step:
        return f"{runs} r WHERE r.id = {units}.run_id"
    assert model is FanOutItem, f"{model.__name__} is not held by a budget"
    steps = table(Step)
    return f"{steps} s JOIN {runs} r ON r.id = s.run_id WHERE s.id = {units}.step_id"
