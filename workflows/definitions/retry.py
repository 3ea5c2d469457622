"""Retry policy of a task: how many attempts, which failures, how long to wait between them."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.utils.module_loading import import_string

from workflows.errors import PermanentError, TransientError
from workflows.status import FailureClass

# The failure classes a policy may retry.
RETRYABLE_CLASSES: frozenset[str] = frozenset(
    {FailureClass.TRANSIENT, FailureClass.TIMEOUT, FailureClass.LEASE_EXPIRED}
)
# Those it retries unless told otherwise: not ``timeout``, whose handler may still be
# running (no thread can be stopped from outside), so that a retry would run it twice at
# once, and which an attempt that overruns by nature meets again every time
# (docs/architecture.md, "Failure classes").
DEFAULT_RETRY_ON: frozenset[str] = frozenset({FailureClass.TRANSIENT, FailureClass.LEASE_EXPIRED})


@dataclass(frozen=True)
class Retry:
    """Exponential backoff: attempt *n* failing waits ``initial_interval * backoff**(n-1)``.

    ``max_attempts`` counts every attempt, the first included, and is enforced by the
    engine's own attempt counter, so an attempt whose worker was killed still counts.
    ``non_retryable`` lists exception classes (or their dotted paths) that fail the step
    at once, as :class:`~workflows.PermanentError` always does: their failures are of
    class ``permanent``. A :class:`~workflows.TransientError` is ``transient`` even when
    ``non_retryable`` lists one of its types: the handler said so.

    ``retry_on`` names the failure classes (:class:`~workflows.FailureClass` values or
    their names) this policy retries while attempts remain; by default ``transient``
    (a handler's exception) and ``lease_expired`` (its worker vanished or stalled).
    ``timeout`` (it ran past its node's timeout, or its callback did not come in time)
    is retried only when named: the timed-out handler may still be running, and a retry
    would run it again beside it. Only those three may be named: ``permanent``,
    ``cancelled`` and ``budget`` failures are never retried (the handler, the run or the
    limit said no, and would say it again), and a ``revoked`` attempt goes back to
    ``ready`` without using up an attempt, outside any policy. So
    ``retry_on={"transient", "timeout", "lease_expired"}`` retries every class that may
    be retried, ``retry_on={"transient"}`` fails a step for good the first time its
    worker dies, and ``retry_on=set()`` never retries.
    """

    max_attempts: int = 3
    initial_interval: timedelta = timedelta(seconds=1)
    backoff: float = 2.0
    max_interval: timedelta = timedelta(minutes=5)
    non_retryable: tuple[type[BaseException] | str, ...] = field(default=())
    retry_on: Collection[FailureClass | str] = DEFAULT_RETRY_ON

    def __post_init__(self) -> None:
        # Held as a frozenset of plain names, so that the policy stays hashable and
        # compares equal however the classes were spelled; anything else is left as
        # given for problems() to name.
        entries = self.retry_on
        if isinstance(entries, set | frozenset | list | tuple) and all(
            isinstance(entry, str) for entry in entries
        ):
            object.__setattr__(self, "retry_on", frozenset(str(entry) for entry in entries))

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
        found.extend(_retry_on_problems(self.retry_on))
        return found

    def retries(self, failure_class: str) -> bool:
        """Tell whether a failure of ``failure_class`` is retried (while attempts remain)."""
        return failure_class in self.retry_on

    def delay_after(self, attempt: int) -> timedelta:
        """Return how long to wait after attempt number ``attempt`` (1-based) failed."""
        seconds = self.initial_interval.total_seconds() * self.backoff ** (attempt - 1)
        return min(timedelta(seconds=seconds), self.max_interval)

    def is_retryable(self, exc: BaseException) -> bool:
        """Tell whether ``exc`` is retryable by nature: a
        :class:`~workflows.TransientError`, or neither a
        :class:`~workflows.PermanentError` nor one of ``non_retryable`` (one that is both
        a ``PermanentError`` and a ``TransientError`` is permanent: the safer reading).
        Whether its failure is retried also depends on ``retry_on``: see
        :func:`workflows.engine.failures.classify`."""
        if isinstance(exc, PermanentError):
            return False
        if isinstance(exc, TransientError):
            return True
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
            "retry_on": sorted(self.retry_on),
        }


def _retry_on_problems(retry_on: Any) -> list[str]:
    """What is wrong with a ``retry_on``, one sentence each."""
    if not isinstance(retry_on, set | frozenset | list | tuple):
        return [
            "retry retry_on must be a set of failure classes (e.g. "
            f'{{"transient", "timeout"}}), got {retry_on!r}'
        ]
    found = []
    for entry in retry_on:
        if not isinstance(entry, str) or entry not in FailureClass.values:
            found.append(
                f"retry retry_on names an unknown failure class {entry!r}; the classes are "
                + ", ".join(FailureClass.values)
            )
        elif entry not in RETRYABLE_CLASSES:
            found.append(
                f"retry retry_on cannot name {entry!r}: only "
                + ", ".join(sorted(RETRYABLE_CLASSES))
                + " failures may be retried (permanent, cancelled and budget failures are "
                "never retried, and a revoked attempt is run again without using up one)"
            )
    return found
