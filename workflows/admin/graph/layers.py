"""The first phase of the layered layout: each node's layer (its column), and the
chains of dummy items that carry an edge across the layers it skips.

Pure data, no Django: items are numbered, the nodes first (in their given order), then
one dummy per layer an edge passes through. A dummy is a point an edge is routed
through; giving it a place in its layer's order keeps the boxes of that layer out of
the edge's way.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Chain", "LayeredGraph", "assign_layers", "layered_graph"]


@dataclass(frozen=True)
class Chain:
    """One edge as the items it runs through: its two nodes and the dummies between."""

    source: int
    target: int
    items: tuple[int, ...]


@dataclass
class LayeredGraph:
    """Items by layer, each item's neighbours one layer before and after it, and each
    drawn edge as its chain. ``nodes`` counts the real items (numbered first)."""

    nodes: int
    layer_of: list[int]
    layers: list[list[int]]
    preds: list[list[int]]
    succs: list[list[int]]
    chains: list[Chain]

    def is_dummy(self, item: int) -> bool:
        return item >= self.nodes


def _longest_path(count: int, ups: Sequence[Sequence[int]]) -> list[int]:
    """Each node's layer: the longest path from a root to it.

    Walked with a stack of its own rather than by recursion, so a long chain (a flow
    of hundreds of members one after another) cannot exhaust Python's stack. An
    upstream that would close a cycle is not followed.
    """
    layer = [-1] * count
    for root in range(count):
        stack, path = [root], set()
        while stack:
            item = stack[-1]
            if layer[item] >= 0:
                stack.pop()
            elif item not in path:  # first visit: its upstreams go first
                path.add(item)
                stack.extend(up for up in ups[item] if layer[up] < 0 and up not in path)
            else:  # its upstreams are placed
                stack.pop()
                path.remove(item)
                layer[item] = 1 + max((layer[up] for up in ups[item] if layer[up] >= 0), default=-1)
    return layer


def assign_layers(
    count: int, ups: Sequence[Sequence[int]]
) -> tuple[list[int], list[tuple[int, int]]]:
    """Each node's layer and the edges (upstream, downstream) to draw.

    Longest path first; then a node with more edges out than in (a root, above all) is
    pulled right to just before its nearest downstream, which shortens more edges than
    it lengthens: fewer dummies, fewer long edges to route. An edge that would point
    backwards (it closes a cycle) is left out.
    """
    layer = _longest_path(count, ups)
    edges = [
        (up, item)
        for item in range(count)
        for up in dict.fromkeys(ups[item])
        if layer[up] < layer[item]
    ]
    downs: list[list[int]] = [[] for _ in range(count)]
    ins = [0] * count
    for up, down in edges:
        downs[up].append(down)
        ins[down] += 1
    for item in sorted(range(count), key=lambda item: -layer[item]):
        if downs[item] and ins[item] < len(downs[item]):
            layer[item] = max(layer[item], min(layer[down] for down in downs[item]) - 1)
    return layer, edges


def layered_graph(count: int, ups: Sequence[Sequence[int]]) -> LayeredGraph:
    """The layered graph of ``count`` nodes whose upstreams are ``ups``: layers assigned
    and every edge longer than one layer split by dummies."""
    layer_of, edges = assign_layers(count, ups)
    graph = LayeredGraph(
        nodes=count,
        layer_of=list(layer_of),
        layers=[[] for _ in range(max(layer_of, default=-1) + 1)],
        preds=[[] for _ in range(count)],
        succs=[[] for _ in range(count)],
        chains=[],
    )
    for item in range(count):
        graph.layers[layer_of[item]].append(item)
    for source, target in edges:
        items = [source]
        for layer in range(layer_of[source] + 1, layer_of[target]):
            dummy = len(graph.layer_of)
            graph.layer_of.append(layer)
            graph.layers[layer].append(dummy)
            graph.preds.append([])
            graph.succs.append([])
            items.append(dummy)
        items.append(target)
        for up, down in itertools.pairwise(items):
            graph.succs[up].append(down)
            graph.preds[down].append(up)
        graph.chains.append(Chain(source, target, tuple(items)))
    return graph
