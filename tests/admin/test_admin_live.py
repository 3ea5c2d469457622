"""The console's live view of running work: the run page's progress bars, last log lines
and summaries as rendered (live.js keeps them current: tests/browser), and the per-step
Log page with its stream filter, cursor paging, trim note and refusals."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.admin.admin_console import checkout, staff
from tests.support.live_rows import log, report, running_step
from workflows.admin.live.log import PAGE_SIZE
from workflows.models import Step
from workflows.queries.log_tails import log_tails

pytestmark = pytest.mark.django_db

HOSTILE = '<script>alert("x")</script>'


def run_page(client, step: Step) -> str:
    response = client.get(reverse("admin:workflows_run_change", args=[step.run_id]))
    assert response.status_code == 200
    return response.content.decode()


def log_page(client, step: Step, **params: str):
    url = reverse("admin:workflows_step_log", args=[step.run_id, step.pk])
    return client.get(url, params)


def live_block(html: str, step: Step) -> str:
    """The step's block of the live section, from its start to its (hidden) note."""
    start = html.index(f'<div class="live-step" id="live-{step.pk}"')
    return html[start : html.index('<p class="live-note', start)]


def test_a_running_step_shows_its_progress_message_and_last_log_lines(client):
    client.force_login(staff("viewer"))
    step = running_step()
    report(step, 3, 10, "exporting rows 21-30")
    log(step, *(f"line {n}" for n in range(1, 9)))

    html = run_page(client, step)

    block = live_block(html, step)
    assert '<progress max="100" value="30.0"' in block
    assert "3 of 10 (30%)" in block
    assert "exporting rows 21-30" in block
    assert [line for line in re.findall(r"line \d", block)] == [f"line {n}" for n in range(4, 9)]
    assert 'data-after="8"' in block
    assert f'data-step-url="/api/steps/{step.pk}/"' in block
    assert f'data-frames-url="/api/runs/{step.run_id}/steps/export/frames/"' in block
    assert reverse("admin:workflows_step_log", args=[step.run_id, step.pk]) in block
    assert "worker-7" in block
    assert 'src="/static/workflows/live.js"' in html


def test_progress_without_a_total_is_an_indeterminate_bar(client):
    client.force_login(staff("viewer"))
    step = running_step()
    report(step, 4)

    block = live_block(run_page(client, step), step)

    assert re.search(r"<progress max=\"100\" aria-label", block)
    assert "4 done" in block


def test_a_step_that_reported_nothing_says_so(client):
    client.force_login(staff("viewer"))
    step = running_step()

    block = live_block(run_page(client, step), step)

    assert "no progress reported yet" in block
    assert '<details class="live-summary" open hidden>' in block
    assert 'data-after="0"' in block


def test_log_text_message_and_summary_are_escaped(client):
    client.force_login(staff("viewer"))
    step = running_step()
    report(step, 1, 2, HOSTILE)
    log(step, HOSTILE, summary={"note": HOSTILE, "rows": 10}, summary_version=1)

    html = run_page(client, step)

    assert HOSTILE not in html
    block = live_block(html, step)
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in block
    assert '<details class="live-summary" open><summary>Summary</summary><pre>{' in block
    summary = re.search(
        r'<details class="step-summary"><summary>Summary</summary><pre>(.*?)</pre>', html, re.S
    )
    assert summary and "&quot;rows&quot;: 10" in summary[1] and "&lt;script&gt;" in summary[1]


def test_a_page_with_nothing_running_has_no_live_section_but_stays_live(client):
    client.force_login(staff("viewer"))
    run = checkout()

    html = client.get(reverse("admin:workflows_run_change", args=[run.pk])).content.decode()

    assert 'id="live"' not in html
    # Where a block appears once a step starts.
    assert re.search(r'data-live-region="live">\s*</div>', html)
    assert f'data-live-url="/admin/workflows/run/{run.pk}/live/"' in html
    assert "step-log-link" not in html  # no step wrote frames


def test_the_tails_of_several_steps_cost_one_query(django_assert_num_queries):
    steps = [running_step(f"worker-{n}") for n in range(3)]
    log(steps[0], "a", "b", "c")
    log(steps[2], *(str(n) for n in range(20)))
    steps = list(Step.objects.filter(pk__in=[step.pk for step in steps]).order_by("id"))

    with django_assert_num_queries(1):
        tails = log_tails(steps, 2)

    assert {pk: [frame.text for frame in frames] for pk, frames in tails.items()} == {
        steps[0].pk: ["b", "c"],
        steps[1].pk: [],
        steps[2].pk: ["18", "19"],
    }


def test_the_log_page_lists_frames_with_their_fields(client):
    client.force_login(staff("viewer"))
    step = running_step()
    log(step, "starting", "row 1\nrow 2")
    log(step, "disk almost full", stream="stderr")

    response = log_page(client, step)

    assert response.status_code == 200
    html = response.content.decode()
    rows = re.findall(
        r'<tr class="stream-(\w+)"><td class="num">(\d+)</td><td class="num">(\d+)</td>', html
    )
    assert rows == [("stdout", "1", "1"), ("stdout", "2", "1"), ("stderr", "3", "1")]
    assert "row 1\nrow 2" in html
    assert "log-trimmed" not in html
    assert reverse("admin:workflows_run_change", args=[step.run_id]) in html


def test_the_log_page_filters_by_stream(client):
    client.force_login(staff("viewer"))
    step = running_step()
    log(step, "out 1")
    log(step, "err 1", stream="stderr")
    log(step, "out 2")

    html = log_page(client, step, stream="stderr").content.decode()

    assert "err 1" in html and "out 1" not in html and "out 2" not in html
    assert '<option value="stderr" selected>' in html


def test_the_log_page_pages_forward_by_cursor_and_offers_the_latest(client):
    client.force_login(staff("viewer"))
    step = running_step()
    log(step, *(f"frame {n}" for n in range(1, PAGE_SIZE + 31)))

    first = log_page(client, step).content.decode()
    assert f"frame {PAGE_SIZE}<" in first and f"frame {PAGE_SIZE + 1}<" not in first
    next_url = re.search(r'href="\?after=(\d+)" id="log-next"', first)
    assert next_url and next_url[1] == str(PAGE_SIZE)
    assert 'href="?after=30" id="log-latest"' in first

    second = log_page(client, step, after=next_url[1]).content.decode()
    assert f"frame {PAGE_SIZE + 1}<" in second and f"frame {PAGE_SIZE + 30}<" in second
    assert "frame 1<" not in second
    assert 'id="log-next"' not in second

    empty = log_page(client, step, after="100000").content.decode()
    assert "No frames after #100000." in empty


def test_the_log_page_says_how_many_frames_were_dropped(client):
    client.force_login(staff("viewer"))
    step = running_step()
    log(step, "kept", frames_dropped=1200)

    html = log_page(client, step).content.decode()

    assert "1200 earlier frames were dropped" in html


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"stream": "stdin"}, "stream"),
        ({"stream": "\x00"}, "stream"),
        ({"after": "-1"}, "after"),
        ({"after": "ten"}, "after"),
        ({"after": "99999999999999999999999"}, "after"),
        ({"after": "١٢"}, "after"),
    ],
)
def test_a_parameter_the_page_did_not_issue_is_a_400_naming_it(client, params, field):
    client.force_login(staff("viewer"))
    step = running_step()

    response = log_page(client, step, **params)

    assert response.status_code == 400
    assert re.search(rf'id="log-problem">{field} must be', response.content.decode())


def test_a_step_of_another_run_or_no_step_is_not_found(client):
    client.force_login(staff("viewer"))
    step, other = running_step(), running_step()

    for args in ([step.run_id, other.pk], [step.run_id, "abc"], ["nonexistent", step.pk]):
        response = client.get(reverse("admin:workflows_step_log", args=args))
        assert response.status_code == 404


def test_the_log_page_needs_the_permission_to_view_runs(client):
    client.force_login(staff("nobody"))

    assert log_page(client, running_step()).status_code == 403
