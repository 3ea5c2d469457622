"""The third phase of the layered layout: each item's place across the flow of the
graph (its ``y``, the layers running left to right), keeping its layer's order.

Each sweep asks every item to sit level with the mean of its neighbours in the layer
just placed, dummies insisting more than boxes (so a long edge runs straight), and
solves the whole layer at once: the places closest to those wishes (least squares)
that keep the order and the spacing. With the spacing folded in, that is an isotonic
regression, solved exactly by pooling adjacent violators, in time linear in the layer.
Sweeps alternate direction and end with one that weighs both sides, so a join sits
between its branches and a fork between its children.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from workflows.admin.graph.layers import LayeredGraph

__all__ = ["place_items"]

SWEEPS = 4
# How much more a dummy's wish counts than a box's: long edges straight first.
DUMMY_PULL = 4.0


def _fit(wishes: list[float], weights: list[float], spacing: list[float]) -> list[float]:
    """The places nearest ``wishes`` (weighted least squares) with each place at least
    ``spacing[i]`` below the one before it."""
    offsets = [0.0]
    for gap in spacing:
        offsets.append(offsets[-1] + gap)
    # Blocks of pooled items: [weight, weighted sum, count]; their means must not fall.
    blocks: list[list[float]] = []
    for wish, weight, offset in zip(wishes, weights, offsets, strict=True):
        blocks.append([weight, weight * (wish - offset), 1])
        while len(blocks) > 1 and blocks[-2][1] / blocks[-2][0] > blocks[-1][1] / blocks[-1][0]:
            last = blocks.pop()
            blocks[-1] = [a + b for a, b in zip(blocks[-1], last, strict=True)]
    places: list[float] = []
    for weight, total, count in blocks:
        places.extend([total / weight] * int(count))
    return [place + offset for place, offset in zip(places, offsets, strict=True)]


def _sweep(
    graph: LayeredGraph,
    layers: list[list[int]],
    neighbours: Callable[[int], list[int]],
    y: list[float],
    spacing: Callable[[int, int], float],
) -> None:
    for layer in layers:
        wishes, weights = [], []
        for item in layer:
            near = neighbours(item)
            wishes.append(sum(y[n] for n in near) / len(near) if near else y[item])
            pull = DUMMY_PULL if graph.is_dummy(item) else 1.0
            weights.append(pull * len(near) if near else 0.1)
        gaps = [spacing(a, b) for a, b in itertools.pairwise(layer)]
        for item, place in zip(layer, _fit(wishes, weights, gaps), strict=True):
            y[item] = place


def place_items(graph: LayeredGraph, spacing: Callable[[int, int], float]) -> list[float]:
    """Each item's centre ``y`` (from an arbitrary origin): items in a layer keep their
    order, ``spacing(a, b)`` apart at least (centre to centre)."""
    y = [0.0] * len(graph.layer_of)
    for layer in graph.layers:
        for before, item in itertools.pairwise(layer):
            y[item] = y[before] + spacing(before, item)

    def both(item: int) -> list[int]:
        return graph.preds[item] + graph.succs[item]

    for _ in range(SWEEPS):
        _sweep(graph, graph.layers[1:], graph.preds.__getitem__, y, spacing)
        _sweep(graph, graph.layers[-2::-1], graph.succs.__getitem__, y, spacing)
    _sweep(graph, graph.layers, both, y, spacing)
    return y
