"""django-q2 Schedules for the scanners, installed idempotently.

django-q2's scheduler ticks about every 30 s with a one-minute floor, so these are the
fallback that keeps timers and recovery going in any deployment; the sweeper process
(``manage.py workflows_sweeper``) fires timers within a fraction of a second.
"""

from __future__ import annotations

from dataclasses import dataclass


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
    """Create or update the scanners' schedules; return (name, created) for each."""
    from django_q.models import Schedule

    installed = []
    for spec in SCHEDULES:
        _, created = Schedule.objects.update_or_create(
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
