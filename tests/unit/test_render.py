"""Rendering definitions as Mermaid and DOT: kinds on nodes, edges from after=, when= marked."""

from __future__ import annotations

from datetime import timedelta

from tests.support.handlers import NOOP
from workflows import Sleep, Task, Workflow
from workflows.definitions.render import to_dot, to_mermaid


class Shipping(Workflow, register=False):
    name = "render_shipping"
    version = 4
    pack = Task(NOOP)
    insure = Task(NOOP, when=lambda ctx: ctx.input["value"] > 100)
    wait = Sleep(timedelta(days=1), after=["pack"])
    end = Task(NOOP, after=["insure", "wait"])


class Quoted(Workflow, register=False):
    name = 'render "quoted"'
    only = Task(NOOP, when=lambda ctx: True)


def test_mermaid_labels_kinds_and_dashes_edges_into_conditional_steps():
    assert to_mermaid(Shipping) == "\n".join(
        [
            "%% render_shipping v4",
            "flowchart TD",
            '    step_pack["pack (task)"]',
            '    step_insure["insure? (task)"]',
            '    step_wait["wait (sleep)"]',
            '    step_end["end (task)"]',
            "    step_pack -.-> step_insure",
            "    step_pack --> step_wait",
            "    step_insure --> step_end",
            "    step_wait --> step_end",
        ]
    )


def test_dot_labels_kinds_and_dashes_conditional_steps_and_their_edges():
    assert to_dot(Shipping) == "\n".join(
        [
            'digraph "render_shipping v4" {',
            "    node [shape=box];",
            '    "pack" [label="pack (task)"];',
            '    "insure" [label="insure? (task)", style=dashed];',
            '    "wait" [label="wait (sleep)"];',
            '    "end" [label="end (task)"];',
            '    "pack" -> "insure" [style=dashed];',
            '    "pack" -> "wait";',
            '    "insure" -> "end";',
            '    "wait" -> "end";',
            "}",
        ]
    )


def test_a_conditional_root_is_marked_though_no_edge_leads_to_it():
    assert '    step_only["only? (task)"]' in to_mermaid(Quoted)
    assert '    "only" [label="only? (task)", style=dashed];' in to_dot(Quoted)


def test_dot_escapes_quotes_in_the_workflow_name():
    assert to_dot(Quoted).startswith('digraph "render \\"quoted\\" v1" {\n')


class Labelled(Workflow, register=False):
    name = "render_labelled"
    print_label = Task(external=True, queue="labels")
    anywhere = Task(external=True)


def test_an_external_task_is_labelled_with_its_queue_never_with_its_route_mark():
    drawn = to_mermaid(Labelled)
    assert '    step_print_label["print_label (external task, queue labels)"]' in drawn
    assert '    step_anywhere["anywhere (external task, queue default)"]' in drawn
    assert "external task, queue labels" in to_dot(Labelled)
    assert "@external" not in drawn + to_dot(Labelled)
