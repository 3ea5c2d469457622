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

from collections.abc import Callable, Sequence
from itertools import accumulate, pairwise

from workflows.admin.graph.layers import LayeredGraph

__all__ = ["place_items"]

SWEEPS = 4
# How much more a dummy's wish counts than a box's: long edges straight first.
DUMMY_PULL = 4.0


def _fit(wishes: list[float], weights: list[float], spacing: list[float]) -> list[float]:
    """The places nearest ``wishes`` (weighted least squares) with each place at least
    ``spacing[i]`` below the one before it."""
    offsets = [0.0, *accumulate(spacing)]
    # Pooled blocks of adjacent items, as parallel stacks: their means must not fall.
    mass: list[float] = []
    total: list[float] = []
    size: list[int] = []
    for wish, weight, offset in zip(wishes, weights, offsets, strict=True):
        mass.append(weight)
        total.append(weight * (wish - offset))
        size.append(1)
        while len(mass) > 1 and total[-2] * mass[-1] > total[-1] * mass[-2]:
            last_mass, last_total, last_size = mass.pop(), total.pop(), size.pop()
            mass[-1] += last_mass
            total[-1] += last_total
            size[-1] += last_size
    places: list[float] = []
    for block_mass, block_total, count in zip(mass, total, size, strict=True):
        places += [block_total / block_mass] * count
    return [place + offset for place, offset in zip(places, offsets, strict=True)]


def _sweep(
    layers: list[list[int]],
    neighbours: Sequence[Sequence[int]],
    y: list[float],
    pull: Sequence[float],
    gaps: dict[int, list[float]],
) -> None:
    """Place each of ``layers`` in turn nearest its items' ``neighbours``."""
    for layer in layers:
        wishes, weights = [], []
        for item in layer:
            near = neighbours[item]
            if near:
                wishes.append(sum([y[n] for n in near]) / len(near))
                weights.append(pull[item] * len(near))
            else:  # nothing to follow: stay put, gently
                wishes.append(y[item])
                weights.append(0.1)
        for item, place in zip(layer, _fit(wishes, weights, gaps[id(layer)]), strict=True):
            y[item] = place


def place_items(graph: LayeredGraph, spacing: Callable[[int, int], float]) -> list[float]:
    """Each item's centre ``y`` (from an arbitrary origin): items in a layer keep their
    order, ``spacing(a, b)`` apart at least (centre to centre)."""
    gaps = {id(layer): [spacing(a, b) for a, b in pairwise(layer)] for layer in graph.layers}
    pull = [DUMMY_PULL if graph.is_dummy(item) else 1.0 for item in range(len(graph.layer_of))]
    y = [0.0] * len(graph.layer_of)
    for layer in graph.layers:
        for (before, item), gap in zip(pairwise(layer), gaps[id(layer)], strict=True):
            y[item] = y[before] + gap
    both = [up + down for up, down in zip(graph.preds, graph.succs, strict=True)]
    for _ in range(SWEEPS):
        _sweep(graph.layers[1:], graph.preds, y, pull, gaps)
        _sweep(graph.layers[-2::-1], graph.succs, y, pull, gaps)
    _sweep(graph.layers, both, y, pull, gaps)
    return y
