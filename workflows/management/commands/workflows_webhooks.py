"""Webhook endpoints and deliveries in trouble; replay deliveries, re-enable an endpoint."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.core.management.base import CommandError

from workflows.management.base import DeclaredCommand
from workflows.management.options import argument, json_option
from workflows.management.output import table, to_json
from workflows.models import WebhookEndpoint
from workflows.webhooks import services
from workflows.webhooks.reports import endpoint_summaries, troubled_deliveries

ENDPOINT_COLUMNS = {
    "id": "ENDPOINT",
    "url": "URL",
    "enabled": "ENABLED",
    "event_types": "EVENT TYPES",
    "to_send": "TO SEND",
    "failed": "FAILED",
    "disabled_reason": "DISABLED BECAUSE",
}
DELIVERY_COLUMNS = {
    "id": "DELIVERY",
    "endpoint_id": "ENDPOINT",
    "event_type": "TYPE",
    "message_id": "WEBHOOK-ID",
    "status": "STATUS",
    "attempt": "ATTEMPT",
    "response_status": "HTTP",
    "next_attempt_at": "NEXT ATTEMPT",
    "error": "ERROR",
}


class Command(DeclaredCommand):
    help = (
        "List webhook endpoints (deliveries to send, failed) and the deliveries that failed "
        "or wait for a retry, newest first. --replay queues deliveries again with their "
        "original webhook-id; --enable re-enables an endpoint (after a 410 Gone)."
    )

    arguments = (
        argument(
            "--replay", nargs="+", type=int, metavar="DELIVERY", help="delivery ids to send again"
        ),
        argument("--enable", type=int, metavar="ENDPOINT", help="endpoint id to enable"),
        argument("--limit", type=int, default=50, help="deliveries listed at most (default 50)"),
        json_option("the result"),
    )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["replay"]:
            self._replay(options["replay"], options["json"])
        elif options["enable"] is not None:
            self._enable(options["enable"], options["json"])
        else:
            self._list(options["limit"], options["json"])

    def _list(self, limit: int, as_json: bool) -> None:
        endpoints, deliveries = endpoint_summaries(), troubled_deliveries(limit)
        if as_json:
            self.stdout.write(to_json({"endpoints": endpoints, "deliveries": deliveries}))
            return
        if not endpoints:
            self.stdout.write("no webhook endpoints")
            return
        self.stdout.write(table(ENDPOINT_COLUMNS.values(), _rows(endpoints, ENDPOINT_COLUMNS)))
        self.stdout.write("")
        if deliveries:
            self.stdout.write(table(DELIVERY_COLUMNS.values(), _rows(deliveries, DELIVERY_COLUMNS)))
        else:
            self.stdout.write("no deliveries failed or waiting for a retry")

    def _replay(self, ids: list[int], as_json: bool) -> None:
        result = services.replay_deliveries(ids)
        if as_json:
            self.stdout.write(to_json(result))
        else:
            for pk, reason in result.refused.items():
                self.stderr.write(f"delivery {pk} not replayed: {reason}")
            self.stdout.write(f"{len(result.created)} delivery(ies) queued again")
        if result.refused:
            raise CommandError(f"{len(result.refused)} of {len(ids)} deliveries not replayed")

    def _enable(self, endpoint_id: int, as_json: bool) -> None:
        try:
            enabled = services.enable_endpoint(endpoint_id)
        except WebhookEndpoint.DoesNotExist as missing:
            raise CommandError(f"no webhook endpoint {endpoint_id}") from missing
        if as_json:
            self.stdout.write(to_json({"endpoint": endpoint_id, "enabled_now": enabled}))
        else:
            self.stdout.write(
                f"endpoint {endpoint_id} enabled"
                if enabled
                else f"endpoint {endpoint_id} was already enabled"
            )


def _rows(items: Sequence[Mapping[str, Any]], columns: dict[str, str]) -> list[list[Any]]:
    return [[item[key] for key in columns] for item in items]
