"""A review loop in its third round, in a real browser at 1400 px: the loop's back edge
runs beneath the steps with its label clear of them, and the steps table opens each
step's earlier iterations (``docs/screenshots/take_loops.py`` photographs the same)."""

from __future__ import annotations

import pytest

from tests.browser.test_console import operator, sign_in
from tests.support.loop_review import review_in_round

pytestmark = pytest.mark.django_db(transaction=True)


def overlaps(a: dict, b: dict) -> bool:
    return not (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )


def test_the_back_edge_runs_beneath_the_steps_and_the_history_opens(new_page):
    run = review_in_round(3, operator())
    page = new_page()
    sign_in(page, f"/admin/workflows/run/{run.pk}/change/")

    graph = page.locator("svg.wf-graph")
    nodes = [
        graph.locator(f'a[href="#step-{name}"] rect').bounding_box()
        for name in ("draft", "review", "again", "publish")
    ]
    edge = graph.locator(".wf-back-edge path").bounding_box()
    label = graph.locator(".wf-back-edge text")
    assert label.text_content() == "↻ while its condition holds, max 5"
    label_box = label.bounding_box()
    frame = graph.bounding_box()
    assert edge["y"] + edge["height"] > max(n["y"] + n["height"] for n in nodes)
    assert not any(overlaps(label_box, node) for node in nodes)
    assert label_box["y"] + label_box["height"] <= frame["y"] + frame["height"]
    assert edge["x"] <= nodes[0]["x"] + nodes[0]["width"]  # reaches back to the draft

    review = page.locator("#step-review")
    history = review.locator("details.wf-iterations")
    assert not history.locator("li").first.is_visible()
    history.locator("summary").click()
    rounds = history.locator("li.wf-iteration")
    assert rounds.count() == 2
    assert rounds.first.is_visible()
    assert "rejected by operator — “not yet (1)”" in rounds.first.inner_text()
