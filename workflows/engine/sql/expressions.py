"""New values of a column computed by the database: its clock, ``attempt + n``.

An expression is SQL text written here with its own ``%s`` parameters; a compare-and-set
(:mod:`.updates`) places it as the new value of a column.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any


@dataclass(frozen=True)
class SqlExpr:
    """A fragment of SQL with its parameters, used as the new value of a column."""

    sql: str
    params: tuple[Any, ...] = ()

    def render(self, vendor: str) -> tuple[str, tuple[Any, ...]]:
        """The fragment's text and parameters on a database of ``vendor``."""
        return self.sql, self.params


@dataclass(frozen=True)
class DbClock(SqlExpr):
    """The database clock (plus an offset), rendered for the database of the statement.

    Built without knowing the database, so building ``updated_at=db_now()`` costs no
    router lookup; the statement that uses it renders it once for its connection.
    """

    offset: timedelta | None = None

    def render(self, vendor: str) -> tuple[str, tuple[Any, ...]]:
        if self.offset is None:
            if vendor == "postgresql":
                return "STATEMENT_TIMESTAMP()", ()
            return "STRFTIME('%%Y-%%m-%%d %%H:%%M:%%f', 'NOW')", ()
        seconds = self.offset.total_seconds()
        if vendor == "postgresql":
            return "STATEMENT_TIMESTAMP() + make_interval(secs => %s)", (seconds,)
        return "STRFTIME('%%Y-%%m-%%d %%H:%%M:%%f', 'NOW', %s)", (f"{seconds:+f} seconds",)


_NOW = DbClock("")


def db_now() -> SqlExpr:
    """The database clock, as Django's ``Now()`` renders it on each backend."""
    return _NOW


@dataclass(frozen=True)
class _NowUnlessSet(SqlExpr):
    """``COALESCE(<column>, <the database clock>)``: ``sql`` is the quoted column."""

    def render(self, vendor: str) -> tuple[str, tuple[Any, ...]]:
        now, params = _NOW.render(vendor)
        return f"COALESCE({self.sql}, {now})", params


def db_now_unless_set(name: str) -> SqlExpr:
    """The column ``name``'s value, or the database clock when it has none: a unit's
    ``started_at`` stays its first claim's through retries and reclaims."""
    return _NowUnlessSet(f'"{name}"')


def db_now_plus(delta: timedelta) -> SqlExpr:
    """The database clock plus ``delta``: leases are compared on one clock for all hosts."""
    return DbClock("", offset=delta)


def attempts_plus(count: int) -> SqlExpr:
    """``attempt + count``, computed row by row: a fresh set of attempts after a retry.

    For the models with an ``attempt`` column (steps, items, compensations, webhook
    deliveries)."""
    return SqlExpr('"attempt" + %s', (count,))


# The step counters a telemetry flush moves on: the closed set :func:`counter_plus` formats.
TELEMETRY_COUNTERS = frozenset({"frames_written", "frames_dropped", "summary_version"})


def counter_plus(name: str, count: int) -> SqlExpr:
    """``<name> + count`` for one of :data:`TELEMETRY_COUNTERS`, computed by the row's
    update: frames are numbered from the count the database holds, not a copy in memory."""
    if name not in TELEMETRY_COUNTERS:
        raise ValueError(f"{name!r} is not a telemetry counter")
    return SqlExpr(f'"{name}" + %s', (count,))
