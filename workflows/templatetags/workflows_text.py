"""``{% load workflows_text %}``: the app's words for time in templates.

``{{ moment|ago }}`` says a moment from now (``5 minutes ago``, ``just now``, ``in 2
hours``) and ``{{ moment|age }}`` how long ago it was as a span (``45 seconds``), both
with :mod:`workflows.text` in place of Django's ``timesince``, which says ``0 minutes``
for anything under a minute; ``{{ span|duration }}`` words a ``timedelta`` (``1 hour``);
``{{ run.pk|short_id }}`` is an id's short form; ``{{ step.lease_owner|lease_holder }}``
names who holds a lease (``worker host-1:7:7``, ``external worker go-1``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django import template
from django.utils import timezone

from workflows.text import duration, lease_holder, relative, short_id

register = template.Library()


@register.filter
def ago(moment: datetime | None) -> str:
    """``moment`` from now in words; empty for no moment."""
    return relative(moment, timezone.now()) if moment is not None else ""


@register.filter
def age(moment: datetime | None) -> str:
    """How long ago ``moment`` was, as a span (whole seconds at least); empty for none."""
    if moment is None:
        return ""
    return duration(max(timezone.now() - moment, timedelta(seconds=1)))


register.filter("short_id", short_id)
register.filter("duration", duration)
register.filter("lease_holder", lease_holder)
