"""Where leased work runs and how much of it may run: routes, rates and budgets.

Declared on nodes (``Task(queue="gpu", requires={"cuda"}, rate_limit="10/s", ...)``) and
workflows (``default_queue``, ``max_concurrent_runs``, ``budgets``). These are plain
values: the engine enforces them in its claim transaction, the executor routes by them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from functools import cached_property
from typing import Literal

DEFAULT_QUEUE = "default"
# Queue and capability names travel as django-q2 cluster names (broker list keys).
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,60}$")
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([a-z]+)\s*$")
_PERIODS = {
    **dict.fromkeys(("s", "sec", "second", "seconds"), 1),
    **dict.fromkeys(("m", "min", "minute", "minutes"), 60),
    **dict.fromkeys(("h", "hour", "hours"), 3600),
    **dict.fromkeys(("d", "day", "days"), 86400),
}
PRIORITY_RANGE = range(-1000, 1001)
# A rate limit keeps the moments of its last period's starts: bounded, so that reading
# and writing them stays cheap.
MAX_RATE_COUNT = 1000


def name_problems(label: str, value: object) -> list[str]:
    """A queue or capability name: letters, digits, ``_ . -``, at most 60 characters."""
    if isinstance(value, str) and _NAME.match(value):
        return []
    return [f"{label} must be 1-60 letters, digits, '_', '.' or '-', got {value!r}"]


def priority_problems(value: object) -> list[str]:
    """A priority is an integer from -1000 to 1000 (higher runs first)."""
    if isinstance(value, int) and not isinstance(value, bool) and value in PRIORITY_RANGE:
        return []
    return [f"priority must be an integer from -1000 to 1000, got {value!r}"]


# How a row marks an external unit's route (``Task(external=True)``): a first entry of
# ``requires`` no declared capability can be (names never hold ``@``).
EXTERNAL_MARK = "@external"


@dataclass(frozen=True)
class Route:
    """Where a unit of work may run: a queue, and capabilities its worker must have.

    ``key`` names the django-q2 cluster (the broker's list key) that carries the work:
    ``None`` for the default queue without requirements (the project's own
    ``Q_CLUSTER``), else the queue name, followed by ``+capability`` for each
    requirement in sorted order (``gpu+cuda``). A worker serving queue ``gpu`` with
    capability ``cuda`` listens on ``gpu`` and ``gpu+cuda``.

    ``external``: the work of a ``Task(external=True)``, done by workers outside the
    process (``claim_external``): no django-q2 worker serves it, nothing is enqueued
    for it. Stored on its row as :data:`EXTERNAL_MARK` leading ``requires``, so every
    reader of a row's route knows without another column.
    """

    queue: str = DEFAULT_QUEUE
    requires: frozenset[str] = frozenset()
    external: bool = False

    @property
    def key(self) -> str | None:
        if self.queue == DEFAULT_QUEUE and not self.requires and not self.external:
            return None
        return "+".join(
            [self.queue, *([EXTERNAL_MARK] if self.external else []), *sorted(self.requires)]
        )

    @cached_property
    def requires_text(self) -> str:
        """The requirements as stored on a row: sorted, comma-separated, after the
        external mark of an external route."""
        return ",".join([*([EXTERNAL_MARK] if self.external else []), *sorted(self.requires)])

    @classmethod
    def of_row(cls, queue: str, requires_text: str) -> Route:
        """The route stored on a unit's row (``queue``, ``requires``)."""
        names = [name for name in requires_text.split(",") if name]
        external = EXTERNAL_MARK in names
        return cls(
            queue or DEFAULT_QUEUE,
            frozenset(name for name in names if name != EXTERNAL_MARK),
            external,
        )

    def in_process(self) -> Route:
        """This route without the external mark: where the Python work of an external
        step runs (its compensation)."""
        return Route(self.queue, self.requires) if self.external else self

    def served_by(self, queues: Iterable[str], capabilities: Iterable[str]) -> bool:
        """Tell whether a worker serving ``queues`` with ``capabilities`` may run it
        (an external worker asks :meth:`served_externally_by`)."""
        return not self.external and self._matches(queues, capabilities)

    def served_externally_by(self, queues: Iterable[str], capabilities: Iterable[str]) -> bool:
        """Tell whether an external worker claiming ``queues`` with ``capabilities``
        may do it."""
        return self.external and self._matches(queues, capabilities)

    def _matches(self, queues: Iterable[str], capabilities: Iterable[str]) -> bool:
        return self.queue in set(queues) and self.requires <= set(capabilities)

    def __str__(self) -> str:
        needs = f" requiring {', '.join(sorted(self.requires))}" if self.requires else ""
        where = "external queue" if self.external else "queue"
        return f"{where} {self.queue!r}{needs}"


@dataclass(frozen=True)
class RateLimit:
    """At most ``count`` starts per ``period``, shared by every worker.

    Written ``"10/s"``, ``"100/m"``, ``"5/h"``, ``"1000/d"`` or with a count of units,
    ``"3/10s"`` (three starts per ten seconds).
    """

    count: int
    period: timedelta
    text: str

    @classmethod
    def parse(cls, text: str) -> RateLimit:
        """Parse ``"N/period"``; raise ``ValueError`` naming what is wrong."""
        found = _RATE.match(text) if isinstance(text, str) else None
        unit = _PERIODS.get(found.group(3)) if found else None
        if found is None or unit is None:
            raise ValueError(
                f"rate limit must look like '10/s', '100/m', '5/h', '1000/d' or '3/10s', "
                f"got {text!r}"
            )
        count, multiple = int(found.group(1)), int(found.group(2) or 1)
        if count < 1 or multiple < 1:
            raise ValueError(f"rate limit {text!r} must allow at least 1 start per period")
        if count > MAX_RATE_COUNT:
            raise ValueError(
                f"rate limit {text!r} allows more than {MAX_RATE_COUNT} starts per period; "
                "write it over a shorter period ('1000/s' rather than '60000/m')"
            )
        return cls(count=count, period=timedelta(seconds=unit * multiple), text=text.strip())

    @property
    def interval(self) -> float:
        """Seconds between starts at the steady rate."""
        return self.period.total_seconds() / self.count


def rate_problems(value: object) -> list[str]:
    if value is None:
        return []
    try:
        RateLimit.parse(value)  # type: ignore[arg-type]
    except ValueError as exc:
        return [str(exc)]
    return []


OnExhausted = Literal["hold", "fail"]


@dataclass(frozen=True)
class Budget:
    """A limit on reported usage (``ctx.report_usage(dimension, amount)``).

    ``per="workflow"`` counts the usage of every run of the workflow together;
    ``per="business_key"`` counts each business key's runs apart. With ``period``
    the count starts again from zero each period. When the usage reaches ``limit``,
    further steps of the runs it covers are held (``on_exhausted="hold"``, until an
    operator raises or resets the budget, or the period ends) or fail with
    ``BudgetExhausted`` (``"fail"``). Work already running is never interrupted.
    """

    dimension: str
    limit: Decimal | int | float
    per: Literal["workflow", "business_key"] = "workflow"
    period: timedelta | None = None
    on_exhausted: OnExhausted = "hold"

    def problems(self) -> list[str]:
        found = name_problems("budget dimension", self.dimension)
        if isinstance(self.limit, bool) or not isinstance(self.limit, int | float | Decimal):
            found.append(f"budget limit must be a number, got {self.limit!r}")
        elif self.limit < 0:
            found.append(f"budget limit must be >= 0, got {self.limit!r}")
        if self.per not in ("workflow", "business_key"):
            found.append(f"budget per= must be 'workflow' or 'business_key', got {self.per!r}")
        if self.period is not None and (
            not isinstance(self.period, timedelta) or self.period <= timedelta(0)
        ):
            found.append(f"budget period must be a positive timedelta, got {self.period!r}")
        if self.on_exhausted not in ("hold", "fail"):
            found.append(
                f"budget on_exhausted= must be 'hold' or 'fail', got {self.on_exhausted!r}"
            )
        return found

    def describe(self) -> dict[str, object]:
        return {
            "dimension": self.dimension,
            "limit": str(self.limit),
            "per": self.per,
            "period": self.period.total_seconds() if self.period is not None else None,
            "on_exhausted": self.on_exhausted,
        }
