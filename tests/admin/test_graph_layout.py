"""The layered graph drawing (``workflows.admin.graph``): every edge drawn, none through
a box it does not join, no box on another, absolute path commands, the same picture
each time, for graphs whose edges skip columns: the flow of issue #37, a random DAG of
30 nodes, and the demo's workflows. The checker (``tests.support.svg_graph``) is shown
to fail on drawings with those faults, so its silence means something."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import pytest

from flowsite.demo import flows as demo
from tests.support.svg_graph import arrow_ends, problems, read
from workflows.admin.flow_graph import MemberNode, member_graph_svg
from workflows.admin.graph import GraphStep, graph_steps, layout, step_graph_svg
from workflows.definitions.workflow import Workflow

# The flow the issue drew as one row: e waits for all of a, b and d.
ISSUE_FLOW = {
    "a": (),
    "b": ("a",),
    "c": ("a", "b"),
    "d": ("a", "c"),
    "e": ("a", "b", "d"),
}
STATUSES = ("completed", "failed", "running", "pending", "blocked")


def members(graph: dict[str, tuple[str, ...]]) -> list[MemberNode]:
    return [
        MemberNode(
            name=name,
            after=after,
            workflow="etl",
            status=STATUSES[index % len(STATUSES)],
            join=f"all of {len(after)}" if after else "",
            href=f"/runs/{name}/",
        )
        for index, (name, after) in enumerate(graph.items())
    ]


def random_dag(size: int, seed: int) -> dict[str, tuple[str, ...]]:
    """``size`` nodes, each after one to three of the twelve before it (fan-in, and
    edges that skip columns)."""
    chance = random.Random(seed)
    graph: dict[str, tuple[str, ...]] = {}
    for index in range(size):
        earlier = [f"n{n}" for n in range(max(0, index - 12), index)]
        count = min(len(earlier), chance.randint(1, 3)) if index else 0
        graph[f"n{index}"] = tuple(chance.sample(earlier, count))
    return graph


def edges_of(graph: dict[str, tuple[str, ...]]) -> Counter[tuple[str, str]]:
    return Counter((up, name) for name, after in graph.items() for up in after)


def steps(graph: dict[str, tuple[str, ...]]) -> list[GraphStep]:
    return [
        GraphStep(name, after, "task", index % 4 == 3)
        for index, (name, after) in enumerate(graph.items())
    ]


def test_the_issue_flow_draws_every_edge_around_the_boxes_between_its_ends():
    svg = str(member_graph_svg(members(ISSUE_FLOW), title="issue flow"))
    assert problems(svg) == []
    assert read(svg).pairs() == edges_of(ISSUE_FLOW)
    # e's three upstream edges end at three points: three arrows in, not one.
    ends = arrow_ends(svg)
    assert sorted(count for (target, _), count in ends.items() if target == "e") == [1, 1, 1]


def test_the_issue_flow_puts_each_member_right_of_its_upstreams():
    placed = {place.step.name: place for place in layout(members(ISSUE_FLOW))}
    for name, after in ISSUE_FLOW.items():
        assert all(placed[up].x < placed[name].x for up in after)


def test_a_root_that_feeds_only_a_late_join_sits_just_before_it():
    graph = {"a": (), "b": ("a",), "c": ("b",), "late": (), "join": ("c", "late")}
    placed = {place.step.name: place.column for place in layout(steps(graph))}
    assert placed == {"a": 0, "b": 1, "c": 2, "late": 2, "join": 3}


def test_edges_declared_crosswise_are_drawn_without_crossing():
    # Declared order would put c (after b) above d (after a): the sweeps swap them.
    graph = {"a": (), "b": (), "c": ("b",), "d": ("a",), "e": ("a",), "f": ("b",)}
    rows = {place.step.name: place.y for place in layout(steps(graph))}
    assert (rows["a"] < rows["b"]) == (max(rows["d"], rows["e"]) < min(rows["c"], rows["f"]))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_random_dag_of_30_nodes_draws_every_edge_and_through_no_box(seed):
    graph = random_dag(30, seed)
    svg = str(step_graph_svg(steps(graph), title="random"))
    assert problems(svg) == []
    assert read(svg).pairs() == edges_of(graph)
    assert max(arrow_ends(svg).values()) == 1  # no two edges share an arrow


def test_jumps_back_in_a_crowded_graph_go_around_every_box():
    graph = random_dag(30, 4)
    loops = {"n9": "n2", "n17": "n5", "n28": "n20"}  # each goes back to an earlier node
    drawn = [replace(step, back_to=loops.get(step.name), max_iterations=3) for step in steps(graph)]
    svg = str(step_graph_svg(drawn, title="loops"))
    assert problems(svg) == []
    backs = Counter((e.source, e.target) for e in read(svg).edges if "back" in e.classes)
    assert backs == Counter(loops.items())


def demo_workflows() -> list[type[Workflow]]:
    return [
        value
        for value in vars(demo).values()
        if isinstance(value, type)
        and issubclass(value, Workflow)
        and value.__module__ == demo.__name__
    ]


@pytest.mark.parametrize("workflow", demo_workflows(), ids=lambda workflow: workflow.__name__)
def test_the_demo_workflows_draw_every_step_edge_and_loop(workflow):
    graph = graph_steps(workflow.snapshot(), {})
    svg = str(step_graph_svg(graph, title=workflow.__name__))
    assert problems(svg) == []
    expected = Counter((up, step.name) for step in graph for up in step.after)
    assert read(svg).pairs() == expected
    backs = Counter((e.source, e.target) for e in read(svg).edges if "back" in e.classes)
    assert backs == Counter((step.name, step.back_to) for step in graph if step.back_to)


def test_the_drawing_is_the_same_each_time():
    graph = random_dag(30, 7)
    first = str(step_graph_svg(steps(graph), title="random"))
    again = str(step_graph_svg(steps(dict(graph)), title="random"))
    assert first == again


# -- the checker fails where it should -----------------------------------------------

BOXES = (
    '<a class="wf-node"><title>a</title><rect x="0" y="0" width="100" height="50"/></a>'
    '<a class="wf-node"><title>b</title><rect x="150" y="0" width="100" height="50"/></a>'
    '<a class="wf-node"><title>c</title><rect x="300" y="0" width="100" height="50"/></a>'
)


def svg_of(body: str) -> str:
    return f'<svg xmlns="http://www.w3.org/2000/svg">{body}</svg>'


def test_the_checker_finds_an_edge_through_a_box():
    through = '<path class="wf-edge" d="M100 25 L297 25" data-from="a" data-to="c"/>'
    assert problems(svg_of(BOXES + through)) == ["edge a → c: passes through b"]
    around = (
        '<path class="wf-edge" d="M100 25 C125 25 125 60 150 60 L250 60 C275 60 275 25 297 25"'
        ' data-from="a" data-to="c"/>'
    )
    assert problems(svg_of(BOXES + around)) == []


def test_the_checker_finds_a_curve_that_bulges_into_a_box():
    bulge = '<path class="wf-edge" d="M100 25 C200 -60 200 110 297 25" data-from="a" data-to="c"/>'
    assert problems(svg_of(BOXES + bulge)) == ["edge a → c: passes through b"]


def test_the_checker_finds_overlapping_boxes_relative_commands_and_wrong_ends():
    overlap = '<a class="wf-node"><title>d</title><rect x="50" y="20" width="100" height="50"/></a>'
    assert problems(svg_of(BOXES + overlap)) == ["boxes overlap: a and d"]
    relative = '<path class="wf-edge" d="M100 25 l47 0" data-from="a" data-to="b"/>'
    assert problems(svg_of(BOXES + relative)) == [
        "edge a → b: not an absolute M/L/Q/C command: l47 0"
    ]
    wrong = '<path class="wf-edge" d="M100 25 L147 25" data-from="a" data-to="c"/>'
    assert problems(svg_of(BOXES + wrong)) == ["edge a → c: does not end at c's box"]
