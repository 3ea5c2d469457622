"""django-q2 Schedules for the scanners, installed idempotently.

django-q2's scheduler ticks about every 30 s with a one-minute floor, so these are the
fallback that keeps timers and recovery going in any deployment; the sweeper process
(``manage.py workflows_sweeper``) fires timers within a fraction of a second.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import connections, router, transaction

logger = logging.getLogger("workflows.schedules")


@dataclass(frozen=True)
class ScheduleSpec:
    name: str
    func: str
    minutes: int


SCHEDULES = (
    ScheduleSpec("workflows: fire due timers", "workflows.tasks.fire_timers", 1),
    ScheduleSpec("workflows: recover", "workflows.tasks.recover", 1),
)


def install_schedules() -> list[tuple[str, bool]]:
    """Create or update the scanners' schedules; return (name, created) for each.

    Each schedule is one row, found by its name: its function, interval and repeats are
    set to the spec's (a row an older version or a person changed is put back), and its
    next run is left as it is. django-q2 does not make names unique, and two installs
    racing (two hosts migrating at once) or a copy made in its admin leave two rows,
    which would both run and made this fail with ``MultipleObjectsReturned``: the oldest
    is kept and the copies deleted. One transaction; on PostgreSQL it locks the table
    first, so that concurrent installs take turns instead of each creating a row
    (SQLite's ``BEGIN IMMEDIATE`` takes turns already).
    """
    from django_q.models import Schedule

    alias = router.db_for_write(Schedule)
    installed = []
    with transaction.atomic(using=alias):
        _lock_table(alias, Schedule._meta.db_table)
        for spec in SCHEDULES:
            rows = Schedule.objects.using(alias).filter(name=spec.name)
            copies = list(rows.order_by("pk").values_list("pk", flat=True)[1:])
            if copies:
                Schedule.objects.using(alias).filter(pk__in=copies).delete()
                logger.warning("deleted %d copies of the schedule %r", len(copies), spec.name)
            _, created = rows.update_or_create(
                name=spec.name,
                defaults={
                    "func": spec.func,
                    "schedule_type": Schedule.MINUTES,
                    "minutes": spec.minutes,
                    "repeats": -1,
                },
            )
            installed.append((spec.name, created))
    return installed


def _lock_table(alias: str, table: str) -> None:
    """On PostgreSQL, hold ``table`` against other installs until the transaction ends
    (reads go on: the mode conflicts only with itself and with writers)."""
    connection = connections[alias]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                f"LOCK TABLE {connection.ops.quote_name(table)} IN SHARE ROW EXCLUSIVE MODE"
            )
