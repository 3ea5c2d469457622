"""Retry policy of a task: how many attempts, how long to wait between them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.utils.module_loading import import_string

from workflows.errors import PermanentError


@dataclass(frozen=True)
class Retry:
    """Exponential backoff: attempt *n* failing waits ``initial_interval * backoff**(n-1)``.

    ``max_attempts`` counts every attempt, the first included, and is enforced by the
    engine's own attempt counter, so an attempt whose worker was killed still counts.
    ``non_retryable`` lists exception classes (or their dotted paths) that fail the step
    at once, as :class:`~workflows.PermanentError` always does.
    """

    max_attempts: int = 3
    initial_interval: timedelta = timedelta(seconds=1)
    backoff: float = 2.0
    max_interval: timedelta = timedelta(minutes=5)
    non_retryable: tuple[type[BaseException] | str, ...] = field(default=())

    def problems(self) -> list[str]:
        """Return what is wrong with these numbers, one sentence each."""
        found = []
        if not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            found.append(f"retry max_attempts must be an integer >= 1, got {self.max_attempts!r}")
        for label in ("initial_interval", "max_interval"):
            value = getattr(self, label)
            if not isinstance(value, timedelta) or value < timedelta(0):
                found.append(f"retry {label} must be a non-negative timedelta, got {value!r}")
        if not isinstance(self.backoff, int | float) or self.backoff < 1:
            found.append(f"retry backoff must be a number >= 1, got {self.backoff!r}")
        for entry in self.non_retryable:
            if isinstance(entry, str):
                try:
                    import_string(entry)
                except ImportError as exc:
                    found.append(f"retry non_retryable {entry!r} cannot be imported: {exc}")
            elif not (isinstance(entry, type) and issubclass(entry, BaseException)):
                found.append(
                    f"retry non_retryable entries must be exception classes, got {entry!r}"
                )
        return found

    def delay_after(self, attempt: int) -> timedelta:
        """Return how long to wait after attempt number ``attempt`` (1-based) failed."""
        seconds = self.initial_interval.total_seconds() * self.backoff ** (attempt - 1)
        return min(timedelta(seconds=seconds), self.max_interval)

    def is_retryable(self, exc: BaseException) -> bool:
        """Tell whether ``exc`` may be retried under this policy."""
        if isinstance(exc, PermanentError):
            return False
        classes = tuple(
            import_string(entry) if isinstance(entry, str) else entry
            for entry in self.non_retryable
        )
        return not isinstance(exc, classes)

    def describe(self) -> dict[str, Any]:
        """Return the policy as JSON for the run's snapshot."""
        return {
            "max_attempts": self.max_attempts,
            "initial_interval": self.initial_interval.total_seconds(),
            "backoff": self.backoff,
            "max_interval": self.max_interval.total_seconds(),
            "non_retryable": [
                entry if isinstance(entry, str) else f"{entry.__module__}.{entry.__qualname__}"
                for entry in self.non_retryable
            ],
        }
