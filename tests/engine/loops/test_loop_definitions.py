"""Definitions of loops and polls are checked when the class is created: each problem
names the workflow, the step and what is wrong with it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.support.handlers import NOOP
from workflows import DefinitionError, Loop, Task, Workflow


def again(ctx) -> bool:
    return False


def refused(**steps: Any) -> str:
    """The message of the DefinitionError a workflow of ``steps`` is refused with."""
    with pytest.raises(DefinitionError) as caught:
        type("Looped", (Workflow,), {"__module__": __name__, "name": "looped", **steps})
    return str(caught.value)


def loop(**options: Any) -> Loop:
    return Loop(**{"back_to": "draft", "while_": again, "max_iterations": 3, **options})


def test_back_to_an_unknown_step():
    message = refused(draft=Task(NOOP), again=loop(back_to="drfat"))
    assert "workflow 'looped' v1, step 'again'" in message
    assert "back_to 'drfat' is not a step (steps: draft, again)" in message


def test_back_to_the_loop_itself():
    message = refused(draft=Task(NOOP), again=loop(back_to="again"))
    assert "step 'again': back_to names the loop itself" in message


def test_back_to_a_step_after_the_loop():
    message = refused(draft=Task(NOOP), again=loop(back_to="publish"), publish=Task(NOOP))
    assert "step 'again': back_to 'publish' is not upstream of the loop" in message


def test_back_to_a_step_on_another_branch():
    message = refused(
        start=Task(NOOP),
        left=Task(NOOP, after="start"),
        right=Task(NOOP, after="start"),
        again=loop(back_to="right", after="left"),
    )
    assert "step 'again': back_to 'right' is not upstream of the loop" in message


def test_loops_whose_bodies_cross_are_refused():
    message = refused(
        draft=Task(NOOP),
        review=Task(NOOP),
        inner=loop(back_to="draft"),
        publish=Task(NOOP),
        outer=loop(back_to="review"),
    )
    assert "step 'outer': its body crosses the boundary of loop 'inner'" in message


def test_a_loop_inside_another_loops_body_is_allowed():
    class Nested(Workflow, register=False):
        name = "looped_nested"
        prepare = Task(NOOP)
        draft = Task(NOOP)
        inner = loop(back_to="draft")
        outer = loop(back_to="prepare")
        publish = Task(NOOP)

    assert Nested.graph.loop_bodies == {
        "inner": ("draft",),
        "outer": ("prepare", "draft", "inner"),
    }
    assert Nested.graph.loops_around("draft") == ("inner", "outer")
    assert Nested.graph.loops_around("publish") == ()


def test_a_cycle_through_after_is_still_refused_beside_a_loop():
    message = refused(
        draft=Task(NOOP, after="review"), review=Task(NOOP, after="draft"), again=loop()
    )
    assert "is part of a cycle" in message


@pytest.mark.parametrize(
    ("bound", "shown"), [(0, "0"), (True, "True"), (10_001, "10001"), ("3", "'3'")]
)
def test_max_iterations_out_of_range(bound: object, shown: str):
    message = refused(draft=Task(NOOP), again=loop(max_iterations=bound))
    assert f"step 'again': max_iterations must be an integer from 1 to 10000, got {shown}" in (
        message
    )


def test_on_exhausted_unknown():
    message = refused(draft=Task(NOOP), again=loop(on_exhausted="retry"))
    assert "step 'again': on_exhausted must be one of ('fail', 'continue'), got 'retry'" in message


def test_while_not_callable():
    message = refused(draft=Task(NOOP), again=loop(while_=True))
    assert "step 'again': while_= must be callable, got True" in message


def poll(**options: Any) -> Task:
    return Task(NOOP, **options)


def test_repeat_until_needs_max_iterations():
    message = refused(wait=poll(repeat_until=again))
    assert "step 'wait': repeat_until= needs max_iterations= (a poll must end)" in message


def test_repeat_until_not_callable():
    message = refused(wait=poll(repeat_until="done", max_iterations=3))
    assert "step 'wait': repeat_until= must be callable, got 'done'" in message


def test_every_negative_or_not_a_timedelta():
    negative = refused(wait=poll(repeat_until=again, every=timedelta(seconds=-1), max_iterations=3))
    assert "step 'wait': every must be a timedelta of zero or more" in negative
    number = refused(wait=poll(repeat_until=again, every=300, max_iterations=3))
    assert "every must be a timedelta of zero or more, got 300" in number


@pytest.mark.parametrize("options", [{"every": timedelta(minutes=1)}, {"max_iterations": 3}])
def test_every_or_max_iterations_without_repeat_until(options: dict[str, Any]):
    message = refused(wait=poll(**options))
    assert "step 'wait': every= and max_iterations= need repeat_until=" in message


def test_a_poll_bound_is_checked_as_a_loop_bound():
    message = refused(wait=poll(repeat_until=again, max_iterations=0, on_exhausted="stop"))
    assert "step 'wait': max_iterations must be an integer from 1 to 10000, got 0" in message
    assert "on_exhausted must be one of ('fail', 'continue'), got 'stop'" in message
