"""Spans of time and moments in words: one formatter for every surface.

:func:`duration` says a span (``850 ms``, ``45 seconds``, ``4 minutes, 10 seconds``,
``2 hours, 5 minutes``); :func:`relative` says a moment from now (``in 5 minutes``,
``3 hours, 2 minutes ago``). A number and its unit are joined by a no-break space, as
Django's ``timesince`` joins them, so a line never ends between them. Under a minute
they count seconds and, closer still, say ``just now`` or ``in a moment``: Django's
``timesince`` rounds anything under a minute to ``0 minutes``, which reads as a fault on
a page that is meant to be live.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils.html import avoid_wrapping
from django.utils.translation import ngettext

# (seconds in the unit, singular, plural), largest first.
_UNITS = (
    (365 * 86_400, "%(n)d year", "%(n)d years"),
    (86_400, "%(n)d day", "%(n)d days"),
    (3_600, "%(n)d hour", "%(n)d hours"),
    (60, "%(n)d minute", "%(n)d minutes"),
    (1, "%(n)d second", "%(n)d seconds"),
)
# Closer to now than this, a moment is "just now" or "in a moment": a count of seconds
# that changes on every look says nothing more.
NEARLY_NOW = timedelta(seconds=5)


def duration(span: timedelta, *, depth: int = 2) -> str:
    """``span`` in words: milliseconds under a second, else its largest unit and, up to
    ``depth`` units in all, the ones right below it that are not zero (``2 hours, 5
    minutes``; ``2 hours`` for 2 hours and 10 seconds). A negative span reads ``minus
    …``."""
    if span < timedelta(0):
        return f"minus {duration(-span, depth=depth)}"
    if not span:
        return avoid_wrapping(ngettext("%(n)d second", "%(n)d seconds", 0) % {"n": 0})
    if span < timedelta(seconds=1):
        return avoid_wrapping(f"{span.total_seconds() * 1000:.0f} ms")
    left = int(span.total_seconds())
    parts: list[str] = []
    for size, singular, plural in _UNITS:
        count, left = divmod(left, size)
        if count:
            parts.append(avoid_wrapping(ngettext(singular, plural, count) % {"n": count}))
        elif parts:
            break  # "2 hours, 5 seconds" would skip a unit: stop at the gap
        if len(parts) == depth:
            break
    return ", ".join(parts)


def relative(moment: datetime, now: datetime, *, depth: int = 2) -> str:
    """``moment`` seen from ``now``: ``in 5 minutes`` / ``5 minutes ago``, whole seconds
    under a minute, ``in a moment`` / ``just now`` within :data:`NEARLY_NOW`."""
    if moment > now:
        ahead = moment - now
        return "in a moment" if ahead < NEARLY_NOW else f"in {duration(ahead, depth=depth)}"
    behind = now - moment
    return "just now" if behind < NEARLY_NOW else f"{duration(behind, depth=depth)} ago"
