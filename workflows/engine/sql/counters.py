"""A fan-out step's counters of its items, and its output built from theirs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workflows.engine.sql.connection import engine_connection
from workflows.engine.sql.execute import fetch_one
from workflows.engine.sql.expressions import SqlExpr
from workflows.engine.sql.identifiers import column, table
from workflows.models import FanOutItem, Step

# The counters an item's end moves.
ITEM_COUNTERS = frozenset({"items_completed", "items_failed", "items_skipped"})


@dataclass
class FanOutCounts:
    """The counters of a fan-out step, as left by the last update."""

    status: str
    version: int
    total: int
    completed: int
    failed: int
    skipped: int

    @property
    def finished(self) -> int:
        return self.completed + self.failed + self.skipped


def bump_item_counter(step_id: int, counter: str, by: int = 1) -> FanOutCounts:
    """Add ``by`` to one counter of a fan-out step and return all counters.

    One ``UPDATE … RETURNING`` (SQLite 3.35+ and PostgreSQL): the counters change in the
    same transaction as the item, and concurrent items serialise on the step row.
    """
    if counter not in ITEM_COUNTERS:
        raise ValueError(f"{counter!r} is not an item counter of a fan-out step")
    counted, version = column(Step, counter), column(Step, "version")
    sql = (
        f"UPDATE {table(Step)} SET {counted} = {counted} + %s, "
        f"{version} = {version} + 1 WHERE id = %s RETURNING status, "
        "version, items_total, items_completed, items_failed, items_skipped"
    )
    row = fetch_one(engine_connection(), sql, [by, step_id])
    if row is None:
        raise Step.DoesNotExist(f"step {step_id} does not exist")
    return FanOutCounts(*row)


def item_counts(step_id: int) -> FanOutCounts:
    """Read the counters of a fan-out step without changing them."""
    return FanOutCounts(
        *Step.objects.values_list(
            "status", "version", "items_total", "items_completed", "items_failed", "items_skipped"
        ).get(pk=step_id)
    )


@dataclass(frozen=True)
class _ItemOutputs(SqlExpr):
    step_id: int = 0

    def render(self, vendor: str) -> tuple[str, tuple[Any, ...]]:
        item_table, index = table(FanOutItem), column(FanOutItem, "index")
        if vendor == "postgresql":
            return (
                f"(SELECT COALESCE(jsonb_agg(i.output ORDER BY i.{index}), "
                f"'[]'::jsonb) FROM {item_table} i WHERE i.step_id = %s)",
                (self.step_id,),
            )
        return (
            "(SELECT json_group_array(json(o.output)) FROM (SELECT output FROM "
            f"{item_table} WHERE step_id = %s ORDER BY {index}) o)",
            (self.step_id,),
        )


def item_outputs(step_id: int) -> SqlExpr:
    """The fan-out step's output: its items' outputs in item order, built by the database.

    Used as the new value of ``output`` in the step's compare-and-set (``jsonb_agg`` /
    ``json_group_array``), so ten thousand outputs never pass through Python memory.
    """
    return _ItemOutputs("", step_id=step_id)
