"""Admin for webhooks: endpoints (configuration) and the delivery log (read-only).

Every write goes through :mod:`workflows.webhooks.services`: saving the endpoint form
is a compare-and-set at the version the form was opened with, and the actions rotate
a secret, enable an endpoint or replay deliveries. A secret is shown once, in the
message after creating the endpoint or rotating it, and masked everywhere else.
Refusals (a stale form, a replay of a message still queued) become messages.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TypedDict
from urllib.parse import urlencode

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import flatten_fieldsets
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.timezone import localtime

from workflows.admin.changelist import SafeChangelistMixin
from workflows.admin.readonly import ReadOnlyMixin
from workflows.admin.runs import StatusBadgeColumn, badge
from workflows.errors import StaleState
from workflows.models import WebhookDelivery, WebhookEndpoint
from workflows.services.access import REPLAY_DELIVERIES
from workflows.status import DELIVERY_OPEN, DeliveryStatus
from workflows.webhooks import services
from workflows.webhooks.event_types import WEBHOOK_EVENT_TYPES, WILDCARD
from workflows.webhooks.signing import SECRET_PREFIX

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldsetSpec
    from django_stubs_ext import WithAnnotations

    class _DeliveryCounts(TypedDict):
        """What :meth:`WebhookEndpointAdmin.get_queryset` annotates each endpoint with."""

        open_deliveries: int
        failed_deliveries: int

    _CountedEndpoint = WithAnnotations[WebhookEndpoint, _DeliveryCounts]


def masked(secret: str) -> str:
    """``whsec_AbCd…``: enough to tell two secrets apart, not enough to sign."""
    return f"{secret[: len(SECRET_PREFIX) + 4]}…"


class EndpointForm(forms.ModelForm):
    """The endpoint's settings, with the version it was read at for the compare-and-set."""

    url = forms.URLField(
        label="URL",
        max_length=2000,
        assume_scheme="https",
        widget=forms.URLInput(attrs={"class": "vURLField wf-wide"}),
        help_text="Receives a POST per event, signed with the endpoint's secret.",
    )
    event_types = forms.MultipleChoiceField(
        choices=[(WILDCARD, "every event type (*)"), *((t, t) for t in WEBHOOK_EVENT_TYPES)],
        widget=forms.CheckboxSelectMultiple,
        help_text="Which events are POSTed to this URL.",
    )
    version = forms.IntegerField(widget=forms.HiddenInput, required=False)

    class Meta:
        model = WebhookEndpoint
        fields = ("url", "description", "event_types", "enabled")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["version"].initial = self.instance.version


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(SafeChangelistMixin, admin.ModelAdmin):
    form = EndpointForm
    list_display = ("endpoint", "state", "subscribed_to", "open_count", "failed_count")
    readonly_fields = ("secret_masked", "disabled_reason", "created_at", "updated_at")
    actions = ["rotate_secret", "enable"]

    class Media:
        css = {"all": ("workflows/console.css",)}

    def get_fieldsets(
        self, request: HttpRequest, obj: WebhookEndpoint | None = None
    ) -> _FieldsetSpec:
        settings = ("url", "description", "event_types", "enabled", "version")
        if obj is None:
            return [(None, {"fields": settings})]
        return [
            (None, {"fields": settings}),
            ("Signing", {"fields": ("secret_masked",)}),
            ("State", {"fields": ("disabled_reason", "created_at", "updated_at")}),
        ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[_CountedEndpoint]:
        return (
            super()
            .get_queryset(request)
            .annotate(
                open_deliveries=Count("deliveries", filter=Q(deliveries__status__in=DELIVERY_OPEN)),
                failed_deliveries=Count(
                    "deliveries", filter=Q(deliveries__status=DeliveryStatus.FAILED)
                ),
            )
        )

    def save_model(
        self, request: HttpRequest, obj: WebhookEndpoint, form: EndpointForm, change: bool
    ) -> None:
        data = form.cleaned_data
        settings = {
            "url": data["url"],
            "event_types": data["event_types"],
            "description": data["description"],
            "enabled": data["enabled"],
        }
        if not change:
            created = services.create_endpoint(**settings)
            obj.pk, obj.secret = created.pk, created.secret
            self.message_user(
                request,
                format_html(
                    "Signing secret of {}: <code>{}</code> — copy it now, it is not shown "
                    "again (rotate it to get a new one).",
                    created.url,
                    created.secret,
                ),
                messages.WARNING,
            )
            return
        try:
            services.update_endpoint(
                obj.pk, version=data["version"], by=request.user.get_username(), **settings
            )
        except StaleState as refused:
            request._webhook_refusal = str(refused)  # type: ignore[attr-defined]

    def response_change(self, request: HttpRequest, obj: WebhookEndpoint) -> HttpResponse:
        refusal = getattr(request, "_webhook_refusal", None)
        if refusal:
            self.message_user(request, f"Not saved: {refusal}", messages.ERROR)
            return HttpResponseRedirect(request.path)
        return super().response_change(request, obj)

    @admin.display(description="endpoint", ordering="url")
    def endpoint(self, endpoint: WebhookEndpoint) -> SafeString:
        return format_html(
            '{}<div class="wf-quiet">{}</div>', endpoint.url, endpoint.description or ""
        )

    @admin.display(description="state", ordering="enabled")
    def state(self, endpoint: WebhookEndpoint) -> SafeString:
        if endpoint.enabled:
            return badge("completed", "enabled")
        return format_html(
            '{}<div class="wf-quiet">{}</div>',
            badge("failed", "disabled"),
            endpoint.disabled_reason,
        )

    @admin.display(description="event types")
    def subscribed_to(self, endpoint: WebhookEndpoint) -> str:
        return ", ".join(endpoint.event_types)

    def _log_link(self, endpoint: WebhookEndpoint, count: int, **filters: str) -> SafeString:
        query = urlencode({"endpoint__id__exact": endpoint.pk, **filters})
        url = reverse(f"{self.admin_site.name}:workflows_webhookdelivery_changelist")
        return format_html('<a href="{}?{}">{}</a>', url, query, count)

    @admin.display(description="to send")
    def open_count(self, endpoint: _CountedEndpoint) -> SafeString:
        return self._log_link(endpoint, endpoint.open_deliveries)

    @admin.display(description="failed")
    def failed_count(self, endpoint: _CountedEndpoint) -> SafeString:
        return self._log_link(endpoint, endpoint.failed_deliveries, status__exact="failed")

    @admin.display(description="secret")
    def secret_masked(self, endpoint: WebhookEndpoint) -> SafeString:
        return format_html(
            "<code>{}</code> (shown in full only when created or rotated: action “Rotate the "
            "signing secret” in the list)",
            masked(endpoint.secret),
        )

    @admin.action(description="Rotate the signing secret of selected endpoints")
    def rotate_secret(self, request: HttpRequest, queryset: QuerySet[WebhookEndpoint]) -> None:
        for endpoint in queryset.order_by("id"):
            try:
                secret = services.rotate_secret(endpoint.pk)
            except StaleState as refused:
                self.message_user(request, str(refused), messages.ERROR)
                continue
            self.message_user(
                request,
                format_html(
                    "New signing secret of {}: <code>{}</code> — copy it now, it is not "
                    "shown again.",
                    endpoint.url,
                    secret,
                ),
                messages.WARNING,
            )

    @admin.action(description="Re-enable selected endpoints")
    def enable(self, request: HttpRequest, queryset: QuerySet[WebhookEndpoint]) -> None:
        enabled = [
            pk for pk in queryset.values_list("id", flat=True) if services.enable_endpoint(pk)
        ]
        self.message_user(
            request,
            f"{len(enabled)} endpoint(s) enabled. Deliveries skipped while disabled are not "
            "sent again unless replayed from the delivery log.",
        )


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(SafeChangelistMixin, ReadOnlyMixin, StatusBadgeColumn, admin.ModelAdmin):
    """The delivery log: what was sent where, how it went; replays through a service."""

    list_display = (
        "id",
        "endpoint",
        "event_type",
        "status_badge",
        "attempt",
        "answer",
        "when",
    )
    list_filter = ("status", "endpoint", "event_type")
    list_select_related = ("endpoint",)
    search_fields = ("=message_id",)
    search_help_text = "A webhook-id (msg_…)."
    actions = ["replay"]
    fieldsets = [
        (
            None,
            {
                "fields": (
                    "endpoint",
                    "event_type",
                    "message_id",
                    "run",
                    "status_badge",
                    "attempt",
                    "next_attempt_at",
                    "replay_of",
                    "created_at",
                    "delivered_at",
                )
            },
        ),
        ("Request (last attempt)", {"fields": ("headers", "sent_body")}),
        ("Response (last attempt)", {"fields": ("response_status", "response_body", "error")}),
    ]
    readonly_fields = tuple(flatten_fieldsets(fieldsets))

    class Media:
        css = {"all": ("workflows/console.css",)}

    def has_replay_permission(self, request: HttpRequest) -> bool:
        return REPLAY_DELIVERIES.allows(request.user)

    @admin.display(description="HTTP", ordering="response_status")
    def answer(self, delivery: WebhookDelivery) -> str:
        return str(delivery.response_status or "-")

    @admin.display(description="recorded · next attempt", ordering="id")
    def when(self, delivery: WebhookDelivery) -> SafeString:
        """When it was recorded and, while it waits for a retry, when that is due: one
        column, so the log fits beside the admin's sidebar and filters."""
        next_attempt = (
            f"next {date_format(localtime(delivery.next_attempt_at), 'DATETIME_FORMAT')}"
            if delivery.status == DeliveryStatus.RETRY_SCHEDULED and delivery.next_attempt_at
            else ""
        )
        return format_html(
            '<span class="wf-nowrap">{}</span><div class="wf-quiet">{}</div>',
            date_format(localtime(delivery.created_at), "DATETIME_FORMAT"),
            next_attempt,
        )

    @admin.display(description="run")
    def run(self, delivery: WebhookDelivery) -> SafeString | str:
        if delivery.run_id is None:  # an event of a flow as a whole
            return "-"
        return format_html(
            '<a class="wf-id" href="{}">{}</a>',
            reverse(f"{self.admin_site.name}:workflows_run_change", args=[delivery.run_id]),
            delivery.run_id,
        )

    @admin.display(description="headers")
    def headers(self, delivery: WebhookDelivery) -> SafeString | str:
        if not delivery.request_headers:
            return "-"
        return format_html(
            '<pre class="wf-code">{}</pre>',
            format_html_join("\n", "{}: {}", sorted(delivery.request_headers.items())),
        )

    @admin.display(description="body")
    def sent_body(self, delivery: WebhookDelivery) -> SafeString:
        return format_html(
            '<pre class="wf-code">{}</pre>', json.dumps(delivery.body, indent=2, sort_keys=True)
        )

    @admin.action(description="Replay selected deliveries", permissions=["replay"])
    def replay(self, request: HttpRequest, queryset: QuerySet[WebhookDelivery]) -> None:
        result = services.replay_deliveries(queryset.values_list("id", flat=True))
        if result.created:
            self.message_user(
                request,
                f"{len(result.created)} delivery(ies) queued again with their original webhook-id.",
            )
        for pk, reason in result.refused.items():
            self.message_user(request, f"Delivery {pk} not replayed: {reason}", messages.WARNING)
