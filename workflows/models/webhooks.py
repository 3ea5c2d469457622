"""Webhook endpoints (configuration) and deliveries (the outbox and the delivery log),
which ``workflows.webhooks`` records and sends.

Both carry a ``version`` that every write compares and increments, like the engine's
rows: an endpoint is edited by operators while senders read it, and a delivery is
claimed, leased and fenced like a step.
"""

from __future__ import annotations

from django.core.validators import URLValidator
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from workflows.status import DELIVERY_OPEN, DELIVERY_WAITING, DeliveryStatus
from workflows.webhooks.event_types import validate_event_types
from workflows.webhooks.signing import generate_secret, new_message_id


class WebhookEndpoint(models.Model):
    """Where events are POSTed, which of them, and the secret that signs them."""

    url = models.URLField(
        max_length=2000,
        validators=[URLValidator(schemes=["http", "https"])],
        help_text="Receives a POST per event, signed with the secret below.",
    )
    event_types = models.JSONField(
        default=list,
        validators=[validate_event_types],
        help_text='Event types sent here; "*" for all of them.',
    )
    secret = models.CharField(max_length=200, default=generate_secret, editable=False)
    enabled = models.BooleanField(default=True)
    # Why the endpoint was disabled (a 410 Gone, an operator), empty while enabled.
    disabled_reason = models.TextField(blank=True, default="")
    description = models.CharField(max_length=200, blank=True, default="")
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        verbose_name = "webhook endpoint"

    def __str__(self) -> str:
        return self.description or self.url


class WebhookDelivery(models.Model):
    """One event for one endpoint: its body, its attempts, the last response.

    The event is copied (id, type, run, body), not referenced: purging runs deletes
    their events, and the delivery log outlives them. A replay is a new row with the
    same ``message_id``, appended to the endpoint's queue (``replay_of`` names the
    original, which keeps its own outcome).
    """

    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries"
    )
    message_id = models.CharField(max_length=64, default=new_message_id)
    event_id = models.BigIntegerField(help_text="The history event this delivery sends.")
    event_type = models.CharField(max_length=64)
    # Empty for an event of a flow as a whole.
    run_id = models.UUIDField(null=True, blank=True)
    body = models.JSONField()
    replay_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="replays"
    )
    status = models.CharField(
        max_length=32, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempt = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    lease_owner = models.CharField(max_length=200, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # The last attempt: what was sent, what came back.
    request_headers = models.JSONField(default=dict, blank=True)
    response_status = models.PositiveIntegerField(null=True, blank=True)
    response_body = models.TextField(blank=True, default="")
    error = models.TextField(blank=True, default="")
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        verbose_name_plural = "webhook deliveries"
        indexes = [
            # The head of each endpoint's queue: its oldest open delivery.
            models.Index(
                fields=["endpoint", "id"],
                condition=Q(status__in=sorted(DELIVERY_OPEN)),
                name="workflows_delivery_open",
            ),
            # Deliveries waiting for their next attempt, by due time.
            models.Index(
                fields=["next_attempt_at"],
                condition=Q(status__in=sorted(DELIVERY_WAITING)),
                name="workflows_delivery_due",
            ),
            models.Index(fields=["message_id"], name="workflows_delivery_message"),
            models.Index(fields=["run_id"], name="workflows_delivery_run"),
        ]

    def __str__(self) -> str:
        return f"delivery {self.pk}: {self.event_type} [{self.status}]"

    def replayed(self) -> WebhookDelivery:
        """A new delivery (unsaved) of the same message to the same endpoint, due now."""
        return WebhookDelivery(
            endpoint_id=self.endpoint_id,
            message_id=self.message_id,
            event_id=self.event_id,
            event_type=self.event_type,
            run_id=self.run_id,
            body=self.body,
            replay_of=self,
            next_attempt_at=Now(),
        )
