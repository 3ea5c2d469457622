"""List event consumers; create or delete one."""

from __future__ import annotations

from typing import Any

from workflows.management.arguments import acting_user, refusals_as_command_errors
from workflows.management.base import DeclaredCommand
from workflows.management.options import Subcommand, Subcommands, argument, json_option, user_option
from workflows.management.output import table, to_json
from workflows.permissions import MANAGE_CONSUMERS
from workflows.queries.consumers import EventFilter, consumer_lags
from workflows.queries.event_cursor import encode_cursor
from workflows.services.consumers import create_consumer, delete_consumer

COLUMNS = ("CONSUMER", "POSITION", "LAG", "LAST ACK", "CREATED", "READS")
# What creating or deleting a consumer takes.
CHANGE = (
    argument("name", metavar="NAME", help="the consumer's name"),
    user_option(f"username of who does it (must hold {MANAGE_CONSUMERS})"),
    json_option("the result"),
)
# What only creating takes: the consumer's filter.
FILTER = (
    argument(
        "--workflow",
        action="append",
        default=[],
        metavar="W",
        help="read only the events of runs of workflow W (repeat for more)",
    ),
    argument(
        "--kind",
        action="append",
        default=[],
        metavar="TYPE",
        help="read only the events of type TYPE, e.g. run.completed (repeat for more)",
    ),
)


class Command(DeclaredCommand):
    help = (
        "Event consumers (workflows.consume/ack, GET /api/events/?consumer=NAME). Without "
        "an action, or with 'list': every consumer with its position (the last event it "
        "acknowledged), its lag (events it has yet to acknowledge) and when it last "
        "acknowledged. 'create NAME' creates a consumer at the start of the history "
        "(reading over HTTP never creates one: an unknown name is a 404), reading only the "
        "events of the workflows named by --workflow and of the types named by --kind when "
        "given (its filter for life); 'delete NAME' "
        "deletes one (its events stay). --user names who does it; that user must hold "
        f"{MANAGE_CONSUMERS}."
    )

    arguments = (
        Subcommands(
            "action",
            (
                Subcommand(
                    "list", "list the consumers (the default)", (json_option("the consumers"),)
                ),
                Subcommand(
                    "create", "create a consumer at the start of the history", CHANGE + FILTER
                ),
                Subcommand("delete", "delete a consumer", CHANGE),
            ),
            default="list",
        ),
        # Listing is the default: its option works without the word "list" too.
        argument("--json", action="store_true", help="print JSON"),
    )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "list":
            self._list(options)
            return
        name = options["name"]
        with refusals_as_command_errors():
            user = acting_user(options["user"], f"{options['action']}_consumer")
            if options["action"] == "create":
                created = create_consumer(
                    name, workflows=options["workflow"], kinds=options["kind"], user=user
                )
                result = {
                    "consumer": created.consumer,
                    "created": created.created,
                    "workflows": list(created.workflows),
                    "kinds": list(created.kinds),
                }
                read = EventFilter(created.workflows, created.kinds).in_words()
                line = (
                    f"consumer {name!r} created at the start of the history; it reads {read}"
                    if created.created
                    else f"consumer {name!r} exists already; unchanged"
                )
            else:
                cursor = delete_consumer(name, user=user)
                result = {"consumer": name, "deleted": True, "cursor": cursor}
                line = f"consumer {name!r} deleted"
        self.stdout.write(to_json(result) if options["json"] else line)

    def _list(self, options: dict[str, Any]) -> None:
        consumers = consumer_lags()
        if options["json"]:
            self.stdout.write(
                to_json(
                    [
                        {
                            "consumer": consumer.name,
                            "cursor": encode_cursor(consumer.position),
                            "position": consumer.position.id,
                            "lag": consumer.lag,
                            "acked_at": consumer.acked_at,
                            "created_at": consumer.created_at,
                            "workflows": list(consumer.event_filter.workflows),
                            "kinds": list(consumer.event_filter.kinds),
                        }
                        for consumer in consumers
                    ]
                )
            )
            return
        if not consumers:
            self.stdout.write("no event consumer; 'workflows_consumers create NAME' creates one")
            return
        rows = (
            [
                consumer.name,
                f"event {consumer.position.id}" if consumer.position.id else "the start",
                consumer.lag,
                consumer.acked_at or "never",
                consumer.created_at,
                consumer.event_filter.in_words(),
            ]
            for consumer in consumers
        )
        self.stdout.write(table(COLUMNS, rows))
