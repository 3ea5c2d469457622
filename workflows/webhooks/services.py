"""The webhook verbs the admin, the command and the sender call.

Endpoints are configuration, but they are read by senders while operators edit them,
so every write here is a compare-and-set like the engine's: it states the version (and
the ``enabled`` state) it expects and bumps ``version``; a write that finds the row
changed raises :class:`~workflows.errors.StaleState` and writes nothing. Deliveries
are never edited by hand: a replay inserts a new delivery.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import QuerySet

from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.updates import cas_update, cas_update_many
from workflows.engine.transaction import transition
from workflows.errors import StaleState
from workflows.models import WebhookDelivery, WebhookEndpoint
from workflows.status import DELIVERY_ENDED, DELIVERY_OPEN, DELIVERY_WAITING, DeliveryStatus
from workflows.webhooks.enqueue import nudge
from workflows.webhooks.signing import generate_secret

logger = logging.getLogger("workflows.webhooks")


def create_endpoint(
    *, url: str, event_types: list[str], description: str = "", enabled: bool = True
) -> WebhookEndpoint:
    """Create an endpoint with a new secret; ``ValidationError`` names a bad URL or type.

    The returned endpoint carries its secret: show it to the user now.
    """
    endpoint = WebhookEndpoint(
        url=url, event_types=event_types, description=description, enabled=enabled
    )
    endpoint.full_clean()
    endpoint.save()
    return endpoint


def _locked(endpoint_id: int) -> WebhookEndpoint:
    """The endpoint row, locked until commit on PostgreSQL (SQLite: the write lock)."""
    return WebhookEndpoint.objects.select_for_update().get(pk=endpoint_id)


def lock_endpoint(endpoint_id: int) -> WebhookEndpoint | None:
    """The endpoint row locked until commit, or None if it was deleted. Every webhook
    write that touches an endpoint and its deliveries locks the endpoint first, so two
    of them never wait for each other in opposite orders."""
    return WebhookEndpoint.objects.select_for_update().filter(pk=endpoint_id).first()


@transition
def update_endpoint(
    endpoint_id: int,
    *,
    version: int,
    url: str,
    event_types: list[str],
    description: str = "",
    enabled: bool = True,
    by: str = "an operator",
) -> None:
    """Change an endpoint as read at ``version``; ``StaleState`` if it changed since.

    Disabling it skips its waiting deliveries, as a 410 does (see
    :func:`disable_endpoint`).
    """
    current = _locked(endpoint_id)
    WebhookEndpoint(url=url, event_types=event_types, description=description).clean_fields()
    changes: dict = {"url": url, "event_types": event_types, "description": description}
    disabling = current.enabled and not enabled
    if current.enabled != enabled:
        changes["disabled_reason"] = f"disabled by {by}" if disabling else ""
    if not cas_update(
        WebhookEndpoint,
        endpoint_id,
        version=version,
        where={"enabled": current.enabled},
        enabled=enabled,
        updated_at=db_now(),
        **changes,
    ):
        raise StaleState(
            f"webhook endpoint {endpoint_id} changed since version {version} was read; reload it"
        )
    if disabling:
        _skip_waiting(endpoint_id, changes["disabled_reason"])


@transition
def rotate_secret(endpoint_id: int) -> str:
    """Give the endpoint a new secret and return it (show it once). Every later attempt,
    retries of older deliveries included, is signed with the new one."""
    current = _locked(endpoint_id)
    secret = generate_secret()
    if not cas_update(
        WebhookEndpoint, endpoint_id, version=current.version, secret=secret, updated_at=db_now()
    ):
        raise StaleState(f"webhook endpoint {endpoint_id} changed while rotating its secret")
    return secret


def _switch(endpoint_id: int, *, enabled: bool, reason: str) -> bool:
    """Compare-and-set the endpoint's ``enabled`` flag under its row lock; False if it
    already had that value."""
    current = _locked(endpoint_id)
    if current.enabled == enabled:
        return False
    if not cas_update(
        WebhookEndpoint,
        endpoint_id,
        version=current.version,
        where={"enabled": current.enabled},
        enabled=enabled,
        disabled_reason=reason,
        updated_at=db_now(),
    ):
        raise StaleState(f"webhook endpoint {endpoint_id} changed while switching it")
    return True


@transition
def disable_endpoint(endpoint_id: int, *, reason: str) -> bool:
    """Disable an enabled endpoint and skip its waiting deliveries; False if it was not
    enabled (a second sender or operator finds it disabled already and does nothing).

    Skipped, not kept waiting: an endpoint re-enabled days later would otherwise get a
    burst of stale events; the operator replays what is still wanted. New events are
    not recorded for a disabled endpoint at all.
    """
    if not _switch(endpoint_id, enabled=False, reason=reason):
        return False
    skipped = _skip_waiting(endpoint_id, reason)
    logger.warning(
        "webhook endpoint %s disabled (%s); %d waiting deliveries skipped",
        endpoint_id,
        reason,
        skipped,
    )
    return True


def _skip_waiting(endpoint_id: int, reason: str) -> int:
    """Skip the endpoint's deliveries still waiting to be sent (not one being sent: its
    sender records its outcome)."""
    return len(
        cas_update_many(
            WebhookDelivery,
            where={"endpoint": endpoint_id, "status": sorted(DELIVERY_WAITING)},
            status=DeliveryStatus.SKIPPED,
            error=f"not sent: endpoint disabled ({reason})",
            next_attempt_at=None,
            updated_at=db_now(),
        )
    )


@transition
def enable_endpoint(endpoint_id: int) -> bool:
    """Enable a disabled endpoint; False if it was enabled already. Deliveries it missed
    (skipped, or never recorded while it was disabled) are not sent: replay them."""
    if not _switch(endpoint_id, enabled=True, reason=""):
        return False
    nudge([endpoint_id])
    return True


@dataclass
class Replay:
    """What :func:`replay_deliveries` did: new delivery ids, and why others were refused."""

    created: list[int] = field(default_factory=list)
    refused: dict[int, str] = field(default_factory=dict)


@transition
def replay_deliveries(delivery_ids: Iterable[int]) -> Replay:
    """Queue each delivery again as a new delivery with the same ``webhook-id`` and body.

    The original keeps its outcome in the log; the replay goes to the end of its
    endpoint's queue (``replay_of`` names the original) and is sent once the endpoint
    is enabled. Refused for a message already waiting or being sent to that endpoint.
    Two operators replaying the same delivery at the same moment may both succeed: the
    receiver then gets the message twice with one ``webhook-id``, which is what
    receivers deduplicate on.
    """
    wanted = sorted(set(delivery_ids))
    originals = {d.pk: d for d in WebhookDelivery.objects.filter(pk__in=wanted)}
    queued = set(
        WebhookDelivery.objects.filter(
            status__in=DELIVERY_OPEN,
            message_id__in=[d.message_id for d in originals.values()],
        ).values_list("endpoint_id", "message_id")
    )
    replay = Replay()
    replays = []
    for pk in wanted:
        original = originals.get(pk)
        if original is None:
            replay.refused[pk] = "no such delivery"
        elif (original.endpoint_id, original.message_id) in queued:
            replay.refused[pk] = f"{original.message_id} is already waiting to be sent"
        else:
            queued.add((original.endpoint_id, original.message_id))
            replays.append(original.replayed())
    WebhookDelivery.objects.bulk_create(replays)
    replay.created = [delivery.pk for delivery in replays]
    nudge({delivery.endpoint_id for delivery in replays})
    return replay


def ended_deliveries(ended_before: datetime) -> QuerySet[WebhookDelivery]:
    """Deliveries that ended (delivered, failed, skipped) before ``ended_before``."""
    return WebhookDelivery.objects.filter(status__in=DELIVERY_ENDED, updated_at__lt=ended_before)


def delete_ended_deliveries(*, ended_before: datetime, limit: int) -> int:
    """Delete up to ``limit`` of :func:`ended_deliveries`, oldest first; return how many.

    The DELETE restates the condition, so a delivery replayed or claimed since the read
    is never removed; a replay of a deleted delivery keeps its own row (``replay_of``
    becomes empty).
    """
    ids = list(ended_deliveries(ended_before).order_by("id").values_list("id", flat=True)[:limit])
    deleted, _ = ended_deliveries(ended_before).filter(id__in=ids).delete()
    return deleted
