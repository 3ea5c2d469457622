"""Graphs as inline SVG, laid out on the server: the run page's picture of its steps
(:mod:`.steps`) and the flow page's of its members (``workflows.admin.flow_graph``).

Drawn here rather than in the browser so the admin needs no script and nothing from a
CDN, and a host's content security policy has nothing to allow. The layout is a
layered (Sugiyama-style) one in four phases, one module each: layers with a dummy for
each layer a long edge skips (:mod:`.layers`), crossing reduction (:mod:`.ordering`),
places (:mod:`.placement`), and edge routes through the gaps between boxes
(:mod:`.routing`); :mod:`.svg` draws the result. ``docs/architecture.md`` says why it is
written here rather than taken from a library.
"""

from __future__ import annotations

from workflows.admin.graph.geometry import Geometry, Placed
from workflows.admin.graph.layout import STEP_GEOMETRY, arrange, layout
from workflows.admin.graph.steps import GraphStep, graph_steps, loop_back_edges, step_graph_svg
from workflows.admin.graph.svg import BackEdge, draw, label

__all__ = [
    "STEP_GEOMETRY",
    "BackEdge",
    "Geometry",
    "GraphStep",
    "Placed",
    "arrange",
    "draw",
    "graph_steps",
    "label",
    "layout",
    "loop_back_edges",
    "step_graph_svg",
]
