"""Flows from the command line: list them, show one's graph, build one (create it, add
members and edges), seal one, cancel one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from workflows.engine.flows.close import CancelPolicy
from workflows.errors import FlowNotFound
from workflows.management.arguments import (
    SHOWN,
    acting_user,
    by_whole_id,
    id_prefix,
    json_value,
    named_one_way,
    only_one,
    refusals_as_command_errors,
    tags_given,
)
from workflows.management.base import DeclaredCommand
from workflows.management.options import (
    DEFAULT_LIMIT,
    Subcommand,
    Subcommands,
    argument,
    json_option,
    limit_option,
    reason_option,
    status_option,
    tag_option,
    user_option,
)
from workflows.management.output import run_line, table, to_json
from workflows.models import Flow, FlowMember
from workflows.queries import run_summary
from workflows.queries.flows import MemberView, flow_graph, get_flow, list_flows
from workflows.services.flows import (
    FlowCancellation,
    add_dependency_once,
    add_to_flow_once,
    cancel_flow,
    create_flow_once,
    seal_flow,
)
from workflows.status import FlowStatus

LIST_COLUMNS = {
    "id": "ID",
    "name": "NAME",
    "key": "KEY",
    "status": "STATUS",
    "revision": "REVISION",
    "member_count": "MEMBERS",
    "unfinished": "UNFINISHED",
    "created_at": "CREATED",
}
# What seal, cancel and list --json print of a flow (list adds its member counts).
SUMMARY_FIELDS = ("id", "name", "key", "status", "revision", "summary", "created_at", "finished_at")
MEMBER_COLUMNS = ("MEMBER", "STATUS", "WORKFLOW", "JOIN", "UPSTREAM", "RUN", "ERROR")

# The flow a verb acts on: FLOW (its id or a unique prefix of one) or --key KEY.
FLOW_ARGUMENTS = (
    argument(
        "flow",
        nargs="?",
        metavar="FLOW",
        help="the flow's id, or a prefix of it that only one flow has (at least 4 characters)",
    ),
    argument("--key", metavar="KEY", help="the flow with this key (create_flow's key)"),
)
ACTING_ARGUMENTS = (
    user_option("username recorded as who did it"),
    json_option("the flow"),
)
# No argparse choices: the verb refuses an unknown policy, so the command exits 1 with the
# verb's own message, as the API answers it.
POLICY = argument(
    "--policy",
    default=CancelPolicy.CANCEL_ALL.value,
    metavar="POLICY",
    help="cancel_all: every member not ended, with compensation as workflows_cancel "
    "(the default); cancel_pending: only the members still blocked; flow_only: close "
    "the flow to new members and edges and leave every member alone",
)


def join_value(text: str) -> str | int:
    """argparse type of ``--join``: a whole number is the count k of an "at least k" join;
    anything else is passed on as written, for the service to accept or refuse in the
    words every surface uses."""
    return int(text) if text.isdigit() else text


# The join a member waits under: "all", "any", or a whole number k (at least k completed).
JOIN = argument(
    "--join",
    type=join_value,
    default="all",
    metavar="JOIN",
    help="when the member may start: all (every upstream member completed, the "
    "default), any (one of them completed) or a number k (at least k of them completed)",
)


class Command(DeclaredCommand):
    help = (
        "Flows: graphs of runs built while they run. 'list [--status S]' lists flows, "
        "newest first, with their members and how many are unfinished; 'show FLOW' prints "
        "a flow's status, revision and summary and each member with its run's status, its "
        "join and the members it waits on (its incoming edges); 'create NAME [--key KEY]' "
        "makes an open flow (the same key again gives the same flow); 'add FLOW WORKFLOW "
        "--member NAME [--input JSON] [--after MEMBER ...] [--join all|any|K]' adds a run "
        "of WORKFLOW as a member, which starts at once unless the members it comes after "
        "hold it; 'edge FLOW UPSTREAM DOWNSTREAM' makes a blocked member wait for another "
        "one too; 'seal FLOW' takes no more members, so the flow ends once they have; "
        "'cancel FLOW [--policy P]' closes it "
        "and cancels every unfinished member (cancel_all, the default), only the blocked "
        "ones (cancel_pending), or none (flow_only). FLOW is the flow's id or a prefix of "
        "it that only one flow has (at least 4 characters); --key KEY names it by its key "
        "instead. Add --json for JSON. A refusal (an unknown flow, an ended flow, a bad "
        "policy, a cycle) exits with status 1 and changes nothing. "
        "'workflows_flow ACTION --help' explains one action, with an example."
    )

    arguments = (
        Subcommands(
            "action",
            (
                Subcommand(
                    "list",
                    "flows, newest first: status, revision, members, unfinished members",
                    (
                        status_option("flows", FlowStatus.values),
                        limit_option("flows", default=DEFAULT_LIMIT),
                        json_option("the flows"),
                    ),
                    ("manage.py workflows_flow list --status open",),
                ),
                Subcommand(
                    "show",
                    "a flow's graph: each member's status, join and upstream members",
                    (*FLOW_ARGUMENTS, json_option("the graph")),
                    ("manage.py workflows_flow show --key build-1.0",),
                ),
                Subcommand(
                    "create",
                    "make an open flow to add members to; with --key, the flow already "
                    "made with that key if there is one (so a repeat makes no second flow)",
                    (
                        argument("name", metavar="NAME", help="the flow's name, for people"),
                        argument(
                            "--key",
                            metavar="KEY",
                            help="the flow's own key, by which other commands may name it; "
                            "the same key with another NAME is refused",
                        ),
                        tag_option(
                            "a tag its members start with unless given their own, e.g. "
                            "customer=acme; repeat for several (at most 32)"
                        ),
                        *ACTING_ARGUMENTS,
                    ),
                    (
                        'manage.py workflows_flow create "build 1.0" --key build-1.0',
                        'manage.py workflows_flow create "orders" --tag customer=acme',
                    ),
                ),
                Subcommand(
                    "add",
                    "add a run of a workflow to the flow as a member; it starts at once "
                    "unless the members it comes after hold it (then it is blocked); the "
                    "same member again with the same workflow and input changes nothing",
                    (
                        *FLOW_ARGUMENTS,
                        argument("workflow", metavar="WORKFLOW", help="registered workflow name"),
                        argument(
                            "--member",
                            required=True,
                            metavar="NAME",
                            help="the member's name, unique in the flow",
                        ),
                        argument(
                            "--input",
                            type=json_value,
                            metavar="JSON",
                            help='the run\'s input, a JSON object, e.g. \'{"order_id": "A-1"}\'',
                        ),
                        argument(
                            "--after",
                            action="extend",
                            nargs="+",
                            default=[],
                            metavar="MEMBER",
                            help="members already in the flow that this one waits for "
                            "(its upstream members)",
                        ),
                        JOIN,
                        tag_option(
                            "a tag of the member's own, replacing the flow's whole; repeat "
                            "for several (default: the flow's tags)"
                        ),
                        user_option("username recorded as who added it"),
                        json_option("the member's run"),
                    ),
                    (
                        "manage.py workflows_flow add --key build-1.0 build_compile "
                        '--member codegen --input \'{"target": "codegen"}\'',
                        "manage.py workflows_flow add --key build-1.0 build_compile "
                        '--member lib --input \'{"target": "lib"}\' --after codegen proto '
                        "--join any",
                    ),
                ),
                Subcommand(
                    "edge",
                    "make DOWNSTREAM, a member still blocked, wait for UPSTREAM too (under "
                    "its join); refused if it would close a cycle",
                    (
                        *FLOW_ARGUMENTS,
                        argument("upstream", metavar="UPSTREAM", help="the member waited for"),
                        argument("downstream", metavar="DOWNSTREAM", help="the member that waits"),
                        argument(
                            "--expected-revision",
                            type=int,
                            metavar="N",
                            help="refuse unless the flow is still at revision N (the "
                            "revision 'show' printed when you decided on the edge)",
                        ),
                        user_option("username recorded as who added it"),
                        json_option("the flow's new revision"),
                    ),
                    ("manage.py workflows_flow edge --key build-1.0 proto lib",),
                ),
                Subcommand(
                    "seal",
                    "no more members or edges: the flow ends once its members have",
                    (*FLOW_ARGUMENTS, *ACTING_ARGUMENTS),
                    ("manage.py workflows_flow seal --key build-1.0",),
                ),
                Subcommand(
                    "cancel",
                    "close the flow and cancel its members by a policy",
                    (
                        *FLOW_ARGUMENTS,
                        POLICY,
                        reason_option("why, for the history"),
                        *ACTING_ARGUMENTS,
                    ),
                    (
                        "manage.py workflows_flow cancel --key build-1.0 "
                        '--policy cancel_pending --reason "superseded by build 1.1"',
                    ),
                ),
            ),
        ),
    )

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "list":
            self._list(options)
            return
        with refusals_as_command_errors():
            if action == "create":
                self._create(options)
                return
            flow = flow_from_options(options)
            acts = {
                "show": self._show,
                "add": self._add,
                "edge": self._edge,
                "seal": self._seal,
                "cancel": self._cancel,
            }
            acts[action](flow, options)

    def _create(self, options: dict[str, Any]) -> None:
        made = create_flow_once(
            options["name"],
            key=options["key"],
            user=acting_user(options["user"], "create_flow"),
            tags=tags_given(options["tags"]),
        )
        flow = flow_summary(Flow.objects.values(*SUMMARY_FIELDS).get(pk=made.value.pk))
        if options["json"]:
            self.stdout.write(to_json({**flow, "tags": made.value.tags, "created": made.created}))
        elif made.created:
            self.stdout.write(f"created {flow_line(flow)}")
        else:
            self.stdout.write(f"{flow_line(flow)}; made before with this key, nothing changed")

    def _add(self, flow: Flow, options: dict[str, Any]) -> None:
        added = add_to_flow_once(
            flow,
            options["workflow"],
            options["input"],
            member=options["member"],
            after=options["after"],
            join=options["join"],
            user=acting_user(options["user"], "add_to_flow"),
            tags=tags_given(options["tags"]),
        )
        run = run_summary(added.value)
        member = options["member"]
        if options["json"]:
            self.stdout.write(
                to_json(
                    {"flow": str(flow.pk), "member": member, "created": added.created, "run": run}
                )
            )
            return
        line = f"member {member!r} of {flow_named(flow.pk, flow.name)}: {run_line(run)}"
        self.stdout.write(line if added.created else f"{line}; already a member, nothing changed")

    def _edge(self, flow: Flow, options: dict[str, Any]) -> None:
        upstream, downstream = options["upstream"], options["downstream"]
        staged = add_dependency_once(
            flow,
            upstream,
            downstream,
            expected_revision=options["expected_revision"],
            user=acting_user(options["user"], "add_dependency"),
        )
        waiting = FlowMember.objects.select_related("run").get(flow=flow, name=downstream).run
        if options["json"]:
            self.stdout.write(
                to_json(
                    {
                        "flow": str(flow.pk),
                        "upstream": upstream,
                        "downstream": downstream,
                        "revision": staged.value,
                        "created": staged.created,
                        "downstream_status": waiting.status,
                    }
                )
            )
            return
        line = (
            f"edge {upstream!r} → {downstream!r} of {flow_named(flow.pk, flow.name)}: "
            f"revision {staged.value}; {downstream!r} is {waiting.status}"
        )
        self.stdout.write(
            line if staged.created else f"{line}; the edge was there, nothing changed"
        )

    def _list(self, options: dict[str, Any]) -> None:
        selected = list_flows(status=options["status"])
        flows = list(
            selected.values(*SUMMARY_FIELDS, "member_count", "unfinished")[: options["limit"]]
        )
        if options["json"]:
            listed = [
                {**flow_summary(f), "members": f["member_count"], "unfinished": f["unfinished"]}
                for f in flows
            ]
            self.stdout.write(to_json(listed))
        elif flows:
            rows = ([flow[name] for name in LIST_COLUMNS] for flow in flows)
            self.stdout.write(table(LIST_COLUMNS.values(), rows))
        else:
            self.stdout.write("no flows match")

    def _show(self, flow: Flow, options: dict[str, Any]) -> None:
        graph = flow_graph(flow)
        shown = graph.as_dict()
        if options["json"]:
            self.stdout.write(to_json(shown))
            return
        self.stdout.write(flow_line(shown))
        self.stdout.write(
            f"{_many(len(graph.members), 'member')}, {_many(len(graph.edges), 'edge')}"
            + (f": {_counted(graph.counts)}" if graph.counts else "")
        )
        not_completed = graph.flow.summary.get("not_completed") if graph.flow.summary else None
        if not_completed:
            self.stdout.write(f"not completed: {_counted_names(not_completed)}")
        if not graph.members:
            self.stdout.write("no members yet")
            return
        self.stdout.write("")
        self.stdout.write(table(MEMBER_COLUMNS, (_member_row(m) for m in graph.members)))

    def _seal(self, flow: Flow, options: dict[str, Any]) -> None:
        seal_flow(flow, user=acting_user(options["user"], "seal_flow"))
        self._changed(flow, None, options)

    def _cancel(self, flow: Flow, options: dict[str, Any]) -> None:
        cancelled = cancel_flow(
            flow,
            options["policy"],
            reason=options["reason"],
            user=acting_user(options["user"], "cancel_flow"),
        )
        self._changed(flow, cancelled, options)

    def _changed(
        self, changed: Flow, cancelled: FlowCancellation | None, options: dict[str, Any]
    ) -> None:
        """Print the flow as seal or cancel left it (and what cancel cancelled)."""
        flow = Flow.objects.values(*SUMMARY_FIELDS).get(pk=changed.pk)
        if options["json"]:
            summary = flow_summary(flow)
            if cancelled is not None:
                summary = {
                    **summary,
                    "cancelled": cancelled.cancelled,
                    "cancellation": cancelled.as_dict(),
                }
            self.stdout.write(to_json(summary))
            return
        line = flow_line(flow)
        if cancelled is not None:
            line += f"; {_many(cancelled.cancelled, 'member')} cancelled ({cancelled.policy})"
        self.stdout.write(line)


def flow_from_options(options: dict[str, Any]) -> Flow:
    """The flow that ``FLOW`` (an id or a unique prefix of one) or ``--key`` names, or a
    refusal naming what matched: none, or several (listed, newest first)."""
    reference, key = options.get("flow"), options.get("key")
    named_one_way("flow", ("FLOW", reference), ("--key", key))
    if reference is None:
        keyed = Flow.objects.filter(key=key).first()
        return only_one([keyed] if keyed is not None else [], "flow", f"key {key!r}")
    flow = by_whole_id(reference, get_flow, FlowNotFound)
    if flow is not None:
        return flow
    matches = Flow.objects.filter(id__startswith=id_prefix(reference, "flow"))
    found = list(matches.order_by("-created_at", "-id")[: SHOWN + 1])
    return only_one(found, "flow", f"id prefix {reference!r}", label=lambda each: str(each.pk))


def flow_summary(flow: Mapping[str, Any]) -> dict[str, Any]:
    """A flow's :data:`SUMMARY_FIELDS` as JSON, its id as text."""
    return {**{name: flow[name] for name in SUMMARY_FIELDS}, "id": str(flow["id"])}


def flow_line(flow: Mapping[str, Any]) -> str:
    """One line saying which flow and where it stands: ``flow <id> 'name': open, revision 3``."""
    key = f" (key {flow['key']!r})" if flow["key"] else ""
    named = flow_named(flow["id"], flow["name"])
    return f"{named}{key}: {flow['status']}, revision {flow['revision']}"


def flow_named(flow_id: UUID | str, name: str) -> str:
    """Which flow, as every line of this command names it: ``flow <id> 'name'``."""
    return f"flow {flow_id} {name!r}"


def _many(count: int, thing: str) -> str:
    return f"{count} {thing}{'' if count == 1 else 's'}"


def _counted(counts: dict[str, int]) -> str:
    return ", ".join(f"{count} {status}" for status, count in sorted(counts.items()))


def _counted_names(statuses: dict[str, str]) -> str:
    # Sorted here: PostgreSQL's jsonb keeps keys in an order of its own.
    return ", ".join(f"{name} ({status})" for name, status in sorted(statuses.items()))


def _member_row(member: MemberView) -> list[Any]:
    return [
        member.name,
        member.status,
        member.workflow,
        member.join,
        ", ".join(member.upstream),
        member.run_id,
        _error_text(member.error),
    ]


def _error_text(error: dict[str, Any] | None) -> str:
    """``code: message`` of a member's error (``dependency_failed: ... 'extract' ...``)."""
    return f"{error.get('code', 'error')}: {error.get('message', '')}" if error else ""
