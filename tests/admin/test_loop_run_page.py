"""The console and loops: the run page's graph draws a loop's back edge and each step's
round, the steps table keeps the earlier iterations, and the approvals pages name the
round a gate waits in."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

import workflows
from tests.admin.admin_console import checkout
from tests.support.loop_review import ExportPoll, review_in_round
from tests.support.users import staff
from workflows.models import Run, Step, StepIteration, Timer
from workflows.testing import run_pending

pytestmark = pytest.mark.django_db


@pytest.fixture
def reviewer() -> User:
    return staff("reviewer", "view_run")


@pytest.fixture
def run(reviewer) -> Run:
    return review_in_round(3, reviewer)


def run_page(client, user: User, run: Run) -> str:
    client.force_login(user)
    response = client.get(reverse("admin:workflows_run_change", args=[run.pk]))
    assert response.status_code == 200
    return response.content.decode()


def graph_of(html: str) -> str:
    start = html.index('<svg class="wf-graph"')
    return html[start : html.index("</svg>", start)]


def step_row(html: str, name: str) -> str:
    start = html.index(f'<tr id="step-{name}">')
    return html[start : html.index("</tr>", start)]


def test_the_graph_draws_the_loops_back_edge_beneath_the_steps(client, reviewer, run):
    graph = graph_of(run_page(client, reviewer, run))
    back = re.search(r'<g class="wf-back-edge"><title>([^<]*)</title>(.*?)</g>', graph)
    assert back is not None
    assert back.group(1) == "again goes back to draft: ↻ while its condition holds, max 5"
    assert 'class="wf-edge back"' in back.group(2)
    assert "↻ while its condition holds, max 5</text>" in back.group(2)
    # Below every node: the edge's lowest point is past the bottom of each rectangle.
    rects = re.findall(r'<rect x="\d+" y="(\d+)" width="\d+" height="(\d+)"', graph)
    path = re.search(r'class="wf-edge back" d="([^"]*)"', back.group(2))
    assert rects and path is not None
    lowest = max(int(y) for y in re.findall(r"\d+", path.group(1))[1::2])
    assert lowest > max(int(y) + int(h) for y, h in rects)


def test_the_graph_and_the_table_show_each_steps_round(client, reviewer, run):
    html = run_page(client, reviewer, run)
    graph = graph_of(html)
    assert "draft (task): completed, round 3</title>" in graph
    assert "review (gate): waiting, round 3</title>" in graph
    assert "publish (task): pending</title>" in graph
    # Attempts count on across rounds: the node shows the round, not a "try 3/5".
    assert "task · completed · \N{MULTIPLICATION SIGN}3</text>" in graph
    assert "try" not in graph
    assert "round 3</span>" in step_row(html, "review")
    assert "round" not in step_row(html, "publish")


def test_the_steps_table_lists_the_earlier_iterations_with_their_decisions(client, reviewer, run):
    html = run_page(client, reviewer, run)
    review = step_row(html, "review")
    assert "Earlier iterations (2)" in review
    rounds = re.findall(r'<li value="(\d+)" class="wf-iteration">(.*?)</li>', review, re.S)
    assert [number for number, _ in rounds] == ["1", "2"]
    first = rounds[0][1]
    # The gate step completed (the loop went on), but the round was rejected: its badge
    # says so, never the green "completed".
    assert '<span class="wf-badge st-rejected">rejected</span>' in first
    assert "st-completed" not in first
    assert "rejected by reviewer — “not yet (1)”" in first
    assert "&quot;decision&quot;" not in first  # a gate's output is its decision, said once
    draft = step_row(html, "draft")
    assert "draft 1" in draft and "draft 2" in draft
    assert "Earlier iterations" not in step_row(html, "publish")


def test_a_looped_step_counts_the_attempts_of_its_current_round(client, reviewer, run):
    # draft ran once in each of three rounds: 3 attempts in all, each round a fresh budget.
    draft = Step.objects.get(run=run, name="draft")
    assert (draft.iteration, draft.attempt) == (3, 3)
    html = run_page(client, reviewer, run)
    budget = draft.max_attempts - 2
    title = f"in this round; 3 of {draft.max_attempts} over every round"
    assert f'<td class="num" title="{title}">1 of {budget}</td>' in step_row(html, "draft")
    assert '<td class="num">\u2013</td>' in step_row(html, "publish")  # no attempt yet


def test_a_long_output_of_an_earlier_iteration_is_cut_short(client, reviewer, run):
    StepIteration.objects.filter(step__run=run, step__name="draft", iteration=1).update(
        output={"text": "x" * 1000}
    )
    draft = step_row(run_page(client, reviewer, run), "draft")
    assert "x" * 280 in draft and "x" * 400 not in draft and "…" in draft


def test_a_run_without_loops_reads_no_iterations(client, reviewer):
    run = review_in_round(1, reviewer)
    client.force_login(reviewer)
    with CaptureQueriesContext(connection) as queries:
        client.get(reverse("admin:workflows_run_change", args=[run.pk]))
    assert not [q for q in queries if "workflows_stepiteration" in q["sql"]]
    looped_run = review_in_round(3, reviewer)
    with CaptureQueriesContext(connection) as looped:
        run_page(client, reviewer, looped_run)
    assert len([q for q in looped if "workflows_stepiteration" in q["sql"]]) == 1


def test_the_inbox_and_the_decision_page_name_the_gates_round(client, reviewer, run):
    client.force_login(reviewer)
    inbox = client.get(reverse("admin:workflows_approvals")).content.decode()
    gate = Step.objects.get(run=run, name="review")
    assert f"step review, round 3 · #{gate.pk}" in inbox
    decide = client.get(reverse("admin:workflows_approval", args=[gate.pk])).content.decode()
    assert f"review, round 3 · #{gate.pk}" in decide
    earlier = decide[decide.index('<tr id="earlier-rounds">') :]
    earlier = earlier[: earlier.index("</tr>")]
    assert earlier.index("Round 1:") < earlier.index("Round 2:")
    assert "rejected by reviewer — “not yet (2)”" in earlier
    first = review_in_round(1, reviewer)
    first_gate = Step.objects.get(run=first, name="review")
    inbox = client.get(reverse("admin:workflows_approvals")).content.decode()
    assert f"step review · #{first_gate.pk}" in inbox
    decide = client.get(reverse("admin:workflows_approval", args=[first_gate.pk]))
    assert b"earlier-rounds" not in decide.content


def test_rejecting_a_loops_gate_says_what_was_done(client, reviewer, run):
    gate = Step.objects.get(run=run, name="review")
    client.force_login(reviewer)
    response = client.post(
        reverse("admin:workflows_approval", args=[gate.pk]),
        {"version": gate.version, "decision": "reject", "feedback": "again"},
        follow=True,
    )
    [note] = [str(message) for message in get_messages(response.wsgi_request)]
    # The loop reset the gate for round 4 in the same transition: the note still says
    # what was decided.
    assert note.startswith(f"Rejected gate “review” of run {str(run.pk)[:8]}; ")
    assert note.endswith("the run is now running.")


def test_without_the_view_permission_the_run_page_shows_no_history(client, run):
    client.force_login(staff("nobody"))
    response = client.get(reverse("admin:workflows_run_change", args=[run.pk]))
    assert response.status_code == 403
    assert b"not yet (1)" not in response.content


def test_a_polling_task_between_polls_says_when_it_polls_again(client, reviewer):
    run = workflows.start_run(ExportPoll)
    run_pending()
    html = run_page(client, reviewer, run)
    assert re.search(
        r"Task “check” polls again in (5\xa0minutes|4\xa0minutes, \d+\xa0seconds)", html
    )
    Timer.objects.filter(run=run, kind="repeat").update(
        due_at=timezone.now() + timedelta(seconds=40)
    )
    soon = run_page(client, reviewer, run)
    assert re.search(r"Task “check” polls again in \d+\xa0seconds", soon)
    assert "0\xa0minutes" not in soon
    assert "round 2 of at most 12" in html
    assert "next start" not in html  # a poll is not a limit's hold
    client.force_login(staff("operator", "view_run"))
    waits = client.get(reverse("admin:workflows_waits")).content.decode()
    row = waits[waits.index('<tr class="wait-poll">') :]
    row = row[: row.index("</tr>")]
    assert "next poll" in row and "round 2" in row and "polls in" in row


def test_the_loops_section_says_where_each_loop_stands(client, reviewer, run):
    html = run_page(client, reviewer, run)
    row = html[html.index('<tr id="loop-again">') :]
    row = row[: row.index("</tr>")]
    assert "3 of at most 5" in row
    assert "draft, review" in row
    assert "review ends and “rejected” no longer holds" in row
    assert "while_" not in html


def test_a_polling_task_is_listed_and_a_run_without_loops_has_no_section(client, reviewer):
    client.force_login(reviewer)
    html = client.get(
        reverse("admin:workflows_run_change", args=[workflows.start_run(ExportPoll).pk])
    ).content.decode()
    assert 'id="loop-check"' in html  # a polling task is a loop of one step
    plain = checkout(order="P-1")
    html = client.get(reverse("admin:workflows_run_change", args=[plain.pk])).content.decode()
    assert 'id="loops-title"' not in html
