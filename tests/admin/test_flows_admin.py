"""The flows of the operator console: the list, the flow page (graph, members, history),
cancelling with each policy and sealing behind confirmation pages, who may do what, and
garbage answered with messages, never a server error."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

import workflows
from tests.admin.admin_console import Checkout, Fragile, notes
from tests.support.users import staff
from tests.support.verb_access import asked as asked  # a fixture, requested by name
from workflows.admin import flow_page
from workflows.admin.graph import GraphStep, layout
from workflows.models import Event, Flow, Run
from workflows.services.access import VERBS
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db

NODE = re.compile(r'<a href="([^"]+)" class="wf-node st-([a-z_]+)"><title>([^<:]+) \(')


@dataclass
class Mixed:
    """A flow whose members ended or stand in each way the page tells apart."""

    flow: Flow
    runs: dict[str, Run]

    def status(self, member: str) -> str:
        return Run.objects.get(pk=self.runs[member].pk).status


def mixed_flow(name: str = "nightly build", key: str | None = "build-7") -> Mixed:
    """``fetch`` completes, ``lint`` fails; ``compile`` (after fetch) completes, ``test``
    (after lint) is cancelled with ``dependency_failed``, ``ship`` (after fetch) waits for
    a signal, ``notify`` (after ship) is blocked, ``report`` (any of fetch, lint) completes."""
    flow = workflows.create_flow(name, key=key)
    runs = {
        "fetch": workflows.add_to_flow(flow, Fragile, {"card": "valid"}, member="fetch"),
        "lint": workflows.add_to_flow(flow, Fragile, {"card": "declined"}, member="lint"),
    }
    runs["compile"] = workflows.add_to_flow(flow, Fragile, {}, member="compile", after=["fetch"])
    runs["test"] = workflows.add_to_flow(flow, Fragile, {}, member="test", after=["lint"])
    runs["ship"] = workflows.add_to_flow(
        flow, Checkout, {"parcels": [1]}, member="ship", after=["fetch"]
    )
    runs["notify"] = workflows.add_to_flow(flow, Fragile, {}, member="notify", after=["ship"])
    runs["report"] = workflows.add_to_flow(
        flow, Fragile, {"card": "valid"}, member="report", after=["fetch", "lint"], join="any"
    )
    run_pending()
    return Mixed(Flow.objects.get(pk=flow.pk), runs)


def page_url(flow: Flow) -> str:
    return reverse("admin:workflows_flow_change", args=[flow.pk])


def act_url(flow: Flow | str, verb: str) -> str:
    flow_id = flow.pk if isinstance(flow, Flow) else flow
    return reverse("admin:workflows_flow_act", args=[flow_id, verb])


@pytest.fixture
def mixed() -> Mixed:
    return mixed_flow()


@pytest.fixture
def operator(client) -> User:
    user = staff("operator", "view_run", "operate_run", "start_run")
    client.force_login(user)
    return user


# -- the list ------------------------------------------------------------------------


def test_the_flows_list_shows_status_revision_and_member_counts(client, operator, mixed):
    other = workflows.create_flow("empty one")
    workflows.seal_flow(other)
    html = client.get(reverse("admin:workflows_flow_changelist")).content.decode()
    row = html[html.index("nightly build") :].split("</tr>")[0]
    assert "build-7" in row
    assert '<span class="wf-badge st-open">open</span>' in row
    assert f'<td class="field-revision">{mixed.flow.revision}</td>' in row
    assert '<td class="field-members">7 / 2</td>' in row  # ship waits, notify is blocked
    assert "empty one" in html
    assert "completed" in html[html.index("empty one") :].split("</tr>")[0]


def test_the_flows_list_filters_by_status_and_searches_name_key_and_id(client, operator, mixed):
    other = workflows.create_flow("weekly report", key="report-2")
    workflows.seal_flow(other)
    changelist = reverse("admin:workflows_flow_changelist")

    def listed(**query: str) -> set[str]:
        html = client.get(changelist, query).content.decode()
        return {name for name in ("nightly build", "weekly report") if name in html}

    assert listed(status__exact="open") == {"nightly build"}
    assert listed(status__exact="completed") == {"weekly report"}
    assert listed(q="NIGHTLY") == {"nightly build"}
    assert listed(q="report-") == {"weekly report"}
    assert listed(q=str(other.pk)[:6]) == {"weekly report"}


def test_with_no_flow_at_all_the_list_says_how_flows_come_to_exist(client, operator):
    html = client.get(reverse("admin:workflows_flow_changelist")).content.decode()
    help_text = " ".join(html[html.index('id="flows-help"') :].split("</div>")[0].split())
    assert "<strong>No flows yet.</strong>" in help_text
    for way in (
        "workflows.create_flow(",
        "workflows.add_to_flow(",
        'manage.py workflows_flow create "nightly" --key nightly-1',
        "manage.py workflows_flow add --key nightly-1 my_workflow --member load",
        "POST /api/flows/",
        '<a href="/api/docs/">',
        "docs/guide/flows.md",
    ):
        assert way in help_text, way


def test_the_help_is_gone_once_a_flow_exists_even_when_a_search_finds_none(client, operator):
    workflows.create_flow("nightly")
    changelist = reverse("admin:workflows_flow_changelist")
    for query in ({}, {"q": "no-such-flow"}, {"status__exact": "failed"}):
        html = client.get(changelist, query).content.decode()
        assert 'id="flows-help"' not in html, query


# -- the flow page -------------------------------------------------------------------


def test_the_flow_page_draws_one_node_per_member_coloured_by_its_runs_status(
    client, operator, mixed
):
    html = client.get(page_url(mixed.flow)).content.decode()
    svg = html[html.index('<svg class="wf-graph"') :].split("</svg>")[0]
    nodes = {name: (href, status) for href, status, name in NODE.findall(svg)}
    assert nodes == {
        name: (reverse("admin:workflows_run_change", args=[run.pk]), mixed.status(name))
        for name, run in mixed.runs.items()
    }
    assert {status for _, status in nodes.values()} == {
        "completed",
        "failed",
        "cancelled",
        "waiting",
        "blocked",
    }
    # Six edges: lint's two lead on from a failure, fetch's three from a completion.
    assert svg.count('class="wf-edge broken"') == 2
    assert svg.count('class="wf-edge done"') == 3
    assert svg.count('class="wf-edge"') == 1
    assert ">console_fragile<" in svg  # the workflow of a member
    assert ">completed · any of 2<" in svg  # report's status and join
    assert ">blocked · all of 1<" in svg


def test_the_flow_page_shows_revision_summary_members_and_history(client, operator, mixed):
    html = client.get(page_url(mixed.flow)).content.decode()
    assert f'revision <strong id="flow-revision">{mixed.flow.revision}</strong>' in html
    assert "7 members, 6 edges, 2 unfinished" in html
    assert '<span class="wf-badge st-completed">3 completed</span>' in html
    test_row = html[html.index('<tr id="member-test">') :].split("</tr>")[0]
    assert "<code>dependency_failed</code>" in test_row
    assert "upstream member &#x27;lint&#x27; ended failed" in test_row
    assert reverse("admin:workflows_run_change", args=[mixed.runs["test"].pk]) in test_row
    lint_row = html[html.index('<tr id="member-lint">') :].split("</tr>")[0]
    assert "card declined by the bank" in lint_row
    report_row = html[html.index('<tr id="member-report">') :].split("</tr>")[0]
    assert "any of 2" in report_row and "fetch, lint" in report_row
    # A member that has not started says what it waits on, in the hold table's words.
    notify_row = html[html.index('<tr id="member-notify">') :].split("</tr>")[0]
    assert '<div class="wf-quiet">a flow member waiting for its upstream members</div>' in (
        notify_row
    )
    assert "wf-quiet" not in report_row
    history = html[html.index('id="history"') :]
    for entry in ("flow.created", "flow.member_added", "flow.edge_added", "flow.dependency_failed"):
        assert f"<code>{entry}</code>" in history


def test_the_flow_page_of_an_ended_flow_names_the_members_that_did_not_complete(
    client, operator, mixed
):
    workflows.send_signal(mixed.runs["ship"], "shipped", {})
    run_pending()
    workflows.seal_flow(mixed.flow)
    run_pending()
    assert Flow.objects.get(pk=mixed.flow.pk).status == "failed"
    html = client.get(page_url(mixed.flow)).content.decode()
    assert "Failed: not every member completed." in html
    stands = html[html.index("Did not complete:") :].split("</p>")[0]
    assert "<strong>lint</strong>" in stands and "<strong>test</strong>" in stands
    assert act_url(mixed.flow, "cancel") not in html and act_url(mixed.flow, "seal") not in html
    assert (
        "<li><strong>Cancel flow</strong>: the flow has ended failed; there is nothing to "
        "cancel</li>"
    ) in html


def test_the_flow_page_costs_the_same_queries_for_a_small_and_a_larger_flow(client, operator):
    counts = []
    for size in (2, 12):
        flow = workflows.create_flow(f"flow of {size}")
        for n in range(size):
            after = [f"m{n - 1}"] if n else []
            workflows.add_to_flow(flow, Fragile, {"card": "valid"}, member=f"m{n}", after=after)
        run_pending()
        with CaptureQueriesContext(connection) as queries:
            assert client.get(page_url(flow)).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1], counts


def test_a_flow_too_large_to_draw_is_listed_a_page_at_a_time(client, operator, monkeypatch):
    monkeypatch.setattr(flow_page, "GRAPH_LIMIT", 4)
    monkeypatch.setattr(flow_page, "MEMBERS_PER_PAGE", 3)
    flow = workflows.create_flow("wide")
    for n in range(5):
        workflows.add_to_flow(flow, Fragile, {"card": "valid"}, member=f"m{n}")
    html = client.get(page_url(flow)).content.decode()
    assert '<svg class="wf-graph"' not in html
    assert "5 members are too many to draw (at most 4)" in html
    assert [f'id="member-m{n}"' in html for n in range(5)] == [True] * 3 + [False] * 2
    html = client.get(page_url(flow), {"members_page": "2"}).content.decode()
    assert [f'id="member-m{n}"' in html for n in range(5)] == [False] * 3 + [True] * 2


def test_a_member_runs_page_links_to_its_flow(client, operator, mixed):
    run = mixed.runs["notify"]
    html = client.get(reverse("admin:workflows_run_change", args=[run.pk])).content.decode()
    assert f'member “notify” of flow <a href="{page_url(mixed.flow)}">nightly build</a>' in html


def test_a_long_chain_of_members_lays_out_without_running_out_of_stack():
    chain = [GraphStep(f"m{n}", (f"m{n - 1}",) if n else (), "", False) for n in range(3000)]
    placed = layout(chain)
    assert [place.column for place in placed] == list(range(3000))


# -- cancel and seal -----------------------------------------------------------------


def test_the_cancel_confirmation_offers_each_policy_with_what_it_would_cancel(
    client, operator, mixed
):
    html = client.get(act_url(mixed.flow, "cancel")).content.decode()
    assert "Cancel every member not ended (2 members now)" in html
    assert "Cancel only the blocked members (1 member now)" in html
    assert "Only close the flow to new members and edges" in html
    assert "The flow's state allows this now" in html
    assert Flow.objects.get(pk=mixed.flow.pk).status == "open"  # a GET changes nothing


@pytest.mark.parametrize(
    ("policy", "cancelled", "ship", "notify"),
    [
        ("cancel_all", 2, "cancelled", "cancelled"),
        ("cancel_pending", 1, "waiting", "cancelled"),
        ("flow_only", 0, "waiting", "blocked"),
    ],
)
def test_cancelling_a_flow_applies_the_chosen_policy(
    client, operator, mixed, policy, cancelled, ship, notify
):
    response = client.post(
        act_url(mixed.flow, "cancel"), {"policy": policy, "reason": "release pulled"}
    )
    assert response.status_code == 302 and response.url == page_url(mixed.flow)
    members = "member" if cancelled == 1 else "members"
    assert notes(response) == [
        f"Flow “nightly build” is cancelled; {cancelled} {members} cancelled by policy {policy}."
    ]
    assert Flow.objects.get(pk=mixed.flow.pk).status == "cancelled"
    run_pending()  # a cancelled run's compensation
    assert (mixed.status("ship"), mixed.status("notify")) == (ship, notify)
    assert mixed.status("fetch") == "completed"
    event = Event.objects.get(flow=mixed.flow, type="flow.cancelled")
    assert event.payload == {
        "flow": "nightly build",
        "policy": policy,
        "reason": "release pulled",
        "by": "operator",
    }


def test_cancelling_twice_says_the_second_changed_nothing_new(client, operator, mixed):
    client.post(act_url(mixed.flow, "cancel"), {"policy": "flow_only", "reason": ""})
    again = client.post(act_url(mixed.flow, "cancel"), {"policy": "flow_only", "reason": ""})
    assert notes(again)[-1:] == [
        "Flow “nightly build” was already cancelled; 0 members cancelled by policy flow_only."
    ]
    # Another policy later is refused: the stored one stands.
    later = client.post(act_url(mixed.flow, "cancel"), {"policy": "cancel_all", "reason": ""})
    assert "was cancelled with policy flow_only" in " ".join(notes(later)), notes(later)
    assert Event.objects.filter(flow=mixed.flow, type="flow.cancelled").count() == 1


def test_sealing_a_flow_and_sealing_it_again(client, operator, mixed):
    html = client.get(act_url(mixed.flow, "seal")).content.decode()
    assert "no more members or edges" in html
    response = client.post(act_url(mixed.flow, "seal"))
    assert notes(response) == [
        "Flow “nightly build” is sealed: it ends once every member has ended."
    ]
    assert Flow.objects.get(pk=mixed.flow.pk).status == "sealed"
    again = client.post(act_url(mixed.flow, "seal"))
    assert notes(again)[-1:] == ["Flow “nightly build” was already sealed; nothing changed."]
    assert Event.objects.filter(flow=mixed.flow, type="flow.sealed").count() == 1


def test_sealing_a_flow_whose_members_all_ended_ends_it(client, operator):
    flow = workflows.create_flow("done already")
    workflows.add_to_flow(flow, Fragile, {"card": "valid"}, member="only")
    run_pending()
    response = client.post(act_url(flow, "seal"))
    assert notes(response) == [
        "Flow “done already” is sealed, and has ended completed: every member had ended already."
    ]


def test_an_ended_flow_refuses_cancel_and_seal_with_a_message(client, operator):
    flow = workflows.create_flow("finished")
    workflows.seal_flow(flow)
    assert Flow.objects.get(pk=flow.pk).status == "completed"
    page = client.get(act_url(flow, "cancel")).content.decode()
    assert "Not possible now: the flow has ended completed; there is nothing to cancel." in page
    response = client.post(act_url(flow, "cancel"), {"policy": "cancel_all"})
    assert response.status_code == 302
    assert notes(response) == [
        "Cancel flow refused: flow 'finished' has ended completed; there is nothing to cancel. "
        "Nothing changed."
    ]
    response = client.post(act_url(flow, "seal"))
    assert notes(response)[-1:] == [
        "Seal flow refused: flow 'finished' is completed; only an open flow can be sealed. "
        "Nothing changed."
    ]


# -- who may ---------------------------------------------------------------------------


def test_a_viewer_sees_flows_but_no_action(client, mixed):
    client.force_login(staff("viewer", "view_run"))
    assert client.get(reverse("admin:workflows_flow_changelist")).status_code == 200
    html = client.get(page_url(mixed.flow)).content.decode()
    assert act_url(mixed.flow, "cancel") not in html and act_url(mixed.flow, "seal") not in html
    assert (
        "<li><strong>Cancel flow</strong>: operating runs needs the permission "
        "workflows.operate_run</li>"
    ) in html
    for verb, data in (("cancel", {"policy": "cancel_all"}), ("seal", {})):
        assert client.get(act_url(mixed.flow, verb)).status_code == 403
        assert client.post(act_url(mixed.flow, verb), data).status_code == 403
    assert Flow.objects.get(pk=mixed.flow.pk).status == "open"
    assert mixed.status("notify") == "blocked"


def test_cancel_needs_operate_and_seal_needs_start(client, mixed, asked):
    client.force_login(staff("starter", "view_run", "start_run"))
    html = client.get(page_url(mixed.flow)).content.decode()
    assert act_url(mixed.flow, "seal") in html and act_url(mixed.flow, "cancel") not in html
    assert client.post(act_url(mixed.flow, "cancel"), {"policy": "cancel_all"}).status_code == 403
    client.force_login(staff("canceller", "view_run", "operate_run"))
    html = client.get(page_url(mixed.flow)).content.decode()
    assert act_url(mixed.flow, "cancel") in html and act_url(mixed.flow, "seal") not in html
    assert client.post(act_url(mixed.flow, "seal")).status_code == 403
    assert Flow.objects.get(pk=mixed.flow.pk).status == "open"
    assert client.post(act_url(mixed.flow, "cancel"), {"policy": "flow_only"}).status_code == 302
    assert Flow.objects.get(pk=mixed.flow.pk).status == "cancelled"
    assert {VERBS["cancel_flow"], VERBS["seal_flow"]} <= set(asked)


def test_staff_who_may_not_view_runs_see_no_flow(client, mixed):
    client.force_login(staff("approver"))
    assert client.get(reverse("admin:workflows_flow_changelist")).status_code == 403
    assert client.get(page_url(mixed.flow)).status_code == 403
    assert client.post(act_url(mixed.flow, "cancel"), {"policy": "cancel_all"}).status_code == 403


# -- garbage ---------------------------------------------------------------------------

BAD_IDS = ("not-a-uuid", "00000000-0000-0000-0000-000000000000", "\x00", "9" * 30, "%")


@pytest.mark.parametrize("flow_id", BAD_IDS)
def test_a_bad_flow_id_gets_a_message(client, operator, flow_id):
    page = client.get(reverse("admin:workflows_flow_change", args=[flow_id]))
    assert page.status_code == 302
    assert "doesn\u2019t exist. Perhaps it was deleted?" in notes(page)[0]
    for method in ("get", "post"):
        response = getattr(client, method)(act_url(flow_id, "cancel"), {"policy": "cancel_all"})
        assert response.status_code == 302
        assert response.url == reverse("admin:workflows_flow_changelist")
        assert "It may have been deleted." in notes(response)[-1]


def test_an_unknown_verb_or_policy_gets_a_message(client, operator, mixed):
    response = client.post(act_url(mixed.flow, "explode"))
    assert response.status_code == 302 and response.url == page_url(mixed.flow)
    assert notes(response) == [
        "There is no flow action called “explode”; there is “cancel” or “seal”."
    ]
    for policy, error in (
        ("cancel_everything", "Select a valid choice."),
        ("\x00", "Select a valid choice."),
        ("", "This field is required."),
    ):
        form = client.post(act_url(mixed.flow, "cancel"), {"policy": policy})
        assert form.status_code == 200 and error in form.content.decode()
    too_long = client.post(
        act_url(mixed.flow, "cancel"), {"policy": "flow_only", "reason": "x" * 3000}
    )
    assert "at most 2000 characters" in too_long.content.decode()
    assert Flow.objects.get(pk=mixed.flow.pk).status == "open"


@pytest.mark.parametrize(
    "query",
    [
        {"status__exact": "bogus"},
        {"status": "\x00"},
        {"q": "\x00"},
        {"q": "%_"},
        {"o": "x.99"},
        {"p": "-3"},
        {"created_at__year": "99999"},
    ],
)
def test_the_flows_list_answers_garbage_without_a_server_error(client, operator, mixed, query):
    response = client.get(reverse("admin:workflows_flow_changelist"), query)
    assert response.status_code in (200, 302)


@pytest.mark.parametrize("query", [{"members_page": "zz"}, {"events_page": "-1"}, {"x": "\x00"}])
def test_the_flow_page_answers_garbage_pages_with_the_first(client, operator, mixed, query):
    html = client.get(page_url(mixed.flow), query).content.decode()
    assert 'id="member-fetch"' in html and "<code>flow.created</code>" in html
