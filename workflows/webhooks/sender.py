"""Sending one endpoint's deliveries: claim the head of its queue, POST, record.

Per endpoint, deliveries go out in the order they were recorded (event order): only
the oldest open delivery (the head) may be claimed, so the next one waits until the
head is delivered or has failed for good. A retry therefore holds back everything
behind it, which is what lets a receiver rely on the order.

The claim is a compare-and-set on the head (``pending``/``retry_scheduled`` whose
``next_attempt_at`` has passed, or ``sending`` whose lease expired) to ``sending`` with
``attempt + 1``, a lease owner and a lease expiry on the database clock. The POST runs
outside any transaction. The outcome is recorded with a compare-and-set fenced by
(id, version, attempt, lease owner, ``sending``). An attempt whose sender vanished is
taken over once its lease expires and counts as an attempt: the receiver may have got
it, so deliveries are at least once, and receivers deduplicate on ``webhook-id``.
"""

from __future__ import annotations

import http.client
import logging
import time
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any
from urllib.error import HTTPError, URLError
from uuid import UUID

from django.db.models import Case, Value, When
from django.db.models.functions import Now

from workflows.conf import workflow_settings
from workflows.engine.sql.expressions import attempts_plus, db_now, db_now_plus
from workflows.engine.sql.updates import cas_update
from workflows.engine.transaction import transition
from workflows.models import WebhookDelivery
from workflows.queries.runs import traceparent_of
from workflows.status import DELIVERY_OPEN, DeliveryStatus
from workflows.tracing import delivery_span
from workflows.webhooks.enqueue import due, endpoints_due
from workflows.webhooks.payload import encode
from workflows.webhooks.services import disable_endpoint, lock_endpoint
from workflows.webhooks.signing import signed_headers
from workflows.workers.runner import worker_id

logger = logging.getLogger("workflows.webhooks")

# How much of a response body the delivery log keeps.
RESPONSE_EXCERPT_BYTES = 2000
# A sending lease outlasts the request's timeout by this much, so a slow but live
# sender is not taken over while it still waits for its answer.
LEASE_MARGIN = timedelta(seconds=30)


@dataclass(frozen=True)
class DeliveryLease:
    """What a sender holds between its claim and its record: one attempt of a delivery."""

    delivery_id: int
    endpoint_id: int
    url: str
    secret: str
    message_id: str
    body: dict[str, Any]
    attempt: int
    owner: str
    version: int
    # The run whose event it sends (None: a flow's), whose trace its POST's span joins.
    run_id: UUID | None = None


@dataclass(frozen=True)
class Outcome:
    """What one POST got back: a status code, or an error saying why there was none."""

    request_headers: dict[str, str]
    status: int | None = None
    body: str = ""
    error: str = ""

    @property
    def delivered(self) -> bool:
        """A 2xx answer: the receiver has the message."""
        return self.status is not None and 200 <= self.status < 300


def max_attempts() -> int:
    """Attempts of one delivery: the first, then one per ``WEBHOOK_RETRY_DELAYS`` entry."""
    return len(workflow_settings.WEBHOOK_RETRY_DELAYS) + 1


def claim_head(
    endpoint_id: int, owner: str, *, now: datetime | None = None
) -> DeliveryLease | None:
    """Claim the head of an enabled endpoint's queue if it is due; None otherwise.

    Loses a race to another sender that claimed (or recorded) the head between this
    read and the compare-and-set: the update then matches no row (on PostgreSQL it
    waits for the winner's commit and re-checks the version), and the loser gets None
    and sends nothing. So two senders never POST the same attempt. A head abandoned on
    its last attempt fails for good here, and the next delivery becomes the head.
    """
    clock = now if now is not None else Now()
    while True:
        head = (
            WebhookDelivery.objects.filter(
                endpoint_id=endpoint_id, endpoint__enabled=True, status__in=DELIVERY_OPEN
            )
            .select_related("endpoint")
            .annotate(due=Case(When(due(clock), then=Value(True)), default=Value(False)))
            .order_by("id")
            .first()
        )
        if head is None or not head.due:
            return None
        if head.status == DeliveryStatus.SENDING and head.attempt >= max_attempts():
            _give_up_abandoned(head)
            continue
        claimed = cas_update(
            WebhookDelivery,
            head.pk,
            version=head.version,
            where={"status": head.status},
            status=DeliveryStatus.SENDING,
            attempt=attempts_plus(1),
            lease_owner=owner,
            lease_expires_at=db_now_plus(2 * workflow_settings.WEBHOOK_TIMEOUT + LEASE_MARGIN),
            updated_at=db_now(),
        )
        if not claimed:
            return None
        return DeliveryLease(
            delivery_id=head.pk,
            endpoint_id=endpoint_id,
            url=head.endpoint.url,
            secret=head.endpoint.secret,
            message_id=head.message_id,
            body=head.body,
            attempt=head.attempt + 1,
            owner=owner,
            version=head.version + 1,
            run_id=head.run_id,
        )


def _give_up_abandoned(head: WebhookDelivery) -> None:
    """Fail a delivery whose sender vanished during its last attempt (a lost race to
    another sender doing the same changes nothing)."""
    if cas_update(
        WebhookDelivery,
        head.pk,
        version=head.version,
        where={"status": DeliveryStatus.SENDING},
        status=DeliveryStatus.FAILED,
        error=f"attempt {head.attempt} of {head.lease_owner} never reported (lease expired)",
        lease_owner="",
        lease_expires_at=None,
        next_attempt_at=None,
        updated_at=db_now(),
    ):
        logger.warning("webhook delivery %s failed for good: its last sender vanished", head.pk)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer of its own (a failure), not a new address to POST to."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


def post(lease: DeliveryLease) -> Outcome:
    """POST the delivery, signed now; never raises for what the network or receiver does.

    Traced as a client span in the trace of the run whose event it sends, with the W3C
    trace headers, so a traced receiver continues that trace (:mod:`workflows.tracing`).
    """
    body = encode(lease.body)
    headers = signed_headers(lease.secret, lease.message_id, int(time.time()), body)
    attributes: dict[str, str | int] = {
        "flowsite.webhook.message_id": lease.message_id,
        "flowsite.webhook.attempt": lease.attempt,
    }
    with delivery_span(partial(traceparent_of, lease.run_id), lease.url, attributes) as span:
        sent = {**headers}
        span.inject(sent)
        outcome = _send(lease.url, body, sent, headers)
        span.answered(outcome.status, outcome.error)
    return outcome


def _send(url: str, body: bytes, sent: dict[str, str], headers: dict[str, str]) -> Outcome:
    """One POST of ``body`` with the headers ``sent``; the outcome keeps ``headers`` (the
    signed ones the delivery log shows)."""
    request = urllib.request.Request(url, data=body, headers=sent, method="POST")
    timeout = workflow_settings.WEBHOOK_TIMEOUT.total_seconds()
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            return Outcome(headers, response.status, _excerpt(response))
    except HTTPError as answer:
        with answer:
            return Outcome(headers, answer.code, _excerpt(answer))
    except (URLError, OSError, http.client.HTTPException) as error:
        reason = getattr(error, "reason", error)
        return Outcome(headers, error=f"{type(error).__name__}: {reason}")


def _excerpt(response: Any) -> str:
    try:
        return response.read(RESPONSE_EXCERPT_BYTES).decode(errors="replace")
    except (OSError, http.client.HTTPException) as error:
        return f"(the body could not be read: {error})"


@transition
def record(lease: DeliveryLease, outcome: Outcome) -> str | None:
    """Record an attempt's outcome; return the delivery's new status, None if fenced off.

    Delivered on a 2xx. A 410 Gone fails the delivery and disables the endpoint (its
    waiting deliveries are skipped). Anything else schedules the next attempt after
    ``WEBHOOK_RETRY_DELAYS[attempt - 1]``, or fails for good when none is left, or is
    skipped when the endpoint was disabled while the request was out (the endpoint is
    read under its lock, so a concurrent disable either sees this delivery waiting and
    skips it, or is seen here). Loses to a sender that took the attempt over after the
    lease expired: the fenced update matches nothing, nothing is written and None is
    returned.
    """
    endpoint = lock_endpoint(lease.endpoint_id)
    changes: dict[str, Any] = {
        "request_headers": outcome.request_headers,
        "response_status": outcome.status,
        "response_body": outcome.body,
        "error": outcome.error,
        "lease_owner": "",
        "lease_expires_at": None,
        "next_attempt_at": None,
        "updated_at": db_now(),
    }
    gone = outcome.status == http.client.GONE
    if outcome.delivered:
        changes.update(status=DeliveryStatus.DELIVERED, delivered_at=db_now())
    elif gone or lease.attempt >= max_attempts():
        changes["status"] = DeliveryStatus.FAILED
    elif endpoint is not None and not endpoint.enabled:
        changes["status"] = DeliveryStatus.SKIPPED
        changes["error"] = (
            f"{outcome.error or f'HTTP {outcome.status}'}; not retried: endpoint disabled "
            f"({endpoint.disabled_reason})"
        )
    else:
        delay = workflow_settings.WEBHOOK_RETRY_DELAYS[lease.attempt - 1]
        changes.update(status=DeliveryStatus.RETRY_SCHEDULED, next_attempt_at=db_now_plus(delay))
    fence = {"status": DeliveryStatus.SENDING, "attempt": lease.attempt, "lease_owner": lease.owner}
    if not cas_update(
        WebhookDelivery, lease.delivery_id, version=lease.version, where=fence, **changes
    ):
        logger.warning(
            "webhook delivery %s attempt %s: lease lost, outcome not recorded",
            lease.delivery_id,
            lease.attempt,
        )
        return None
    if gone:
        disable_endpoint(lease.endpoint_id, reason=f"{lease.url} answered 410 Gone")
    return changes["status"]


def send_endpoint(
    endpoint_id: int, *, now: datetime | None = None, owner: str | None = None
) -> int:
    """Send an endpoint's due deliveries in order; return the number of attempts made.

    Stops at the first attempt that is not delivered (what follows waits for it), when
    nothing is due, or once busy for ``CHAIN_BUDGET``, so a django-q2 task sending a
    long backlog ends well within the queue's timeout.
    """
    owner = owner or worker_id()
    stop_at = time.monotonic() + workflow_settings.CHAIN_BUDGET.total_seconds()
    attempts = 0
    while time.monotonic() < stop_at:
        lease = claim_head(endpoint_id, owner, now=now)
        if lease is None:
            break
        outcome = post(lease)
        attempts += 1
        status = record(lease, outcome)
        if status != DeliveryStatus.DELIVERED:
            logger.info(
                "webhook delivery %s attempt %s to %s: %s",
                lease.delivery_id,
                lease.attempt,
                lease.url,
                status or "lease lost",
            )
            break
    return attempts


def send_due(*, now: datetime | None = None) -> int:
    """Send, in this process, every endpoint's due deliveries; return the attempts made.

    What ``workflows.testing.run_pending`` and the scanner (without django-q2) call.
    """
    return sum(send_endpoint(pk, now=now) for pk in endpoints_due(now=now))
