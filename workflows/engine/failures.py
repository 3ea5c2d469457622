"""Why an attempt of leased work failed: its :class:`~workflows.FailureClass`, decided here.

Every failed attempt of a step, a fan-out item or a compensation is recorded with a class,
in its row's ``failure_class`` column, in the ``failure_class`` of its ``error`` and in
the events that record the failure; ``Retry(retry_on=...)`` chooses by it. The classes
decided from what the handler (or the claim) raised are decided by :func:`classify`, in
this one place; the others are recorded by the transition that causes them:

- ``transient``: :class:`~workflows.TransientError` (whatever ``Retry.non_retryable``
  lists), or any other exception of the handler (:func:`classify`);
- ``permanent``: :class:`~workflows.PermanentError`, an exception listed in
  ``Retry.non_retryable``, an output the database refuses, a ``concurrency_key`` that
  cannot be computed (:func:`classify`);
- ``timeout``: the handler ran past its node's timeout while its worker was alive
  (:class:`AttemptTimedOut`, raised by the worker's watchdog; :func:`classify`), or a
  callback did not come in time; retried only when the policy's ``retry_on`` names it;
- ``cancelled``: :class:`~workflows.RunCancelled`, the run is cancelling, terminated or
  past its deadline (:func:`classify`);
- ``budget``: a budget declared ``on_exhausted="fail"`` refused the start, the claim's
  ``refusal`` (:func:`classify`);
- ``lease_expired``: the lease ran out with no word from the worker (the reclaim,
  :mod:`workflows.engine.recovery`);
- ``revoked``: an operator took the lease (``revoke_lease``).
"""

from __future__ import annotations

from workflows.definitions import Retry
from workflows.definitions.retry import RETRYABLE_CLASSES
from workflows.engine.lease import Lease
from workflows.errors import BudgetExhausted, RunCancelled
from workflows.status import FailureClass


class AttemptTimedOut(Exception):
    """The handler ran past its step's timeout; its result, if it ever returns, is refused.

    Raised by no handler: the worker's watchdog (:mod:`workflows.workers.watchdog`) fails
    the attempt with it, or the runner when a transactional handler returns too late.
    """


def classify(exc: BaseException, lease: Lease | None = None) -> FailureClass:
    """The class of an attempt that failed with ``exc``.

    ``lease``: the attempt's lease, whose retry policy says which exceptions are not
    retryable and whose ``refusal`` is the error a limit refused the start with.
    """
    if lease is not None and exc is lease.refusal:
        # A budget said no; a concurrency key that cannot be computed is a bug in the
        # definition, which no further attempt fixes.
        return FailureClass.BUDGET if isinstance(exc, BudgetExhausted) else FailureClass.PERMANENT
    if isinstance(exc, AttemptTimedOut):
        return FailureClass.TIMEOUT
    if isinstance(exc, RunCancelled):
        return FailureClass.CANCELLED
    retry = lease.retry if lease is not None else None
    if not (retry or Retry()).is_retryable(exc):
        return FailureClass.PERMANENT
    return FailureClass.TRANSIENT


def retried(retry: Retry, failure_class: str) -> bool:
    """Tell whether ``retry`` retries a failure of ``failure_class`` (attempts left aside).

    Never a class the policy may not name (``permanent``, ``cancelled``, ``budget``,
    ``revoked``), whatever a policy built around :meth:`Retry.problems` holds.
    """
    return failure_class in RETRYABLE_CLASSES and retry.retries(failure_class)
