"""``Schedule.cron(...)`` and ``Schedule.every(...)``: schedules declared in a workflow
class, installed by ``migrate`` and at worker start (``workflows.services.schedules``).

``workflows.Schedule`` declares; ``workflows.models.Schedule`` is the stored row. The
declaration is a :class:`ScheduleSpec` without a workflow (the class it is listed in)
and usually without a key (the workflow's name and the expression make one).
"""

from __future__ import annotations

from dataclasses import fields
from datetime import timedelta
from typing import Any

from workflows.definitions.schedules.spec import ScheduleSpec
from workflows.errors import InvalidInput

_OPTIONS = frozenset(f.name for f in fields(ScheduleSpec)) - {"workflow", "cron", "every"}


class Schedule:
    """Declare a schedule in a workflow class::

        class Nightly(Workflow):
            schedules = [Schedule.cron("0 2 * * *", tz="Europe/Berlin", input={"full": True})]

    The options are those of ``create_schedule`` but ``workflow`` and ``paused``.
    """

    def __init__(self) -> None:
        raise TypeError("use Schedule.cron(...) or Schedule.every(...)")

    @staticmethod
    def cron(expression: str, **options: Any) -> ScheduleSpec:
        """A schedule on a five-field cron expression (``"0 2 * * *"``)."""
        return _declared(cron=expression, **options)

    @staticmethod
    def every(interval: timedelta, **options: Any) -> ScheduleSpec:
        """A schedule every ``interval`` (a positive ``timedelta``)."""
        return _declared(every=interval, **options)


def _declared(**options: Any) -> ScheduleSpec:
    unknown = sorted(set(options) - _OPTIONS - {"cron", "every"})
    if unknown:
        raise InvalidInput(
            f"a declared schedule takes no argument {unknown[0]!r}; it takes "
            f"{', '.join(sorted(_OPTIONS))}",
            field=unknown[0],
        )
    spec = ScheduleSpec(workflow="", **{k: v for k, v in options.items() if v is not None})
    spec.check(declared=True)
    return spec
