"""The second phase of the layered layout: the order of the items within each layer,
chosen to cross few edges.

Sweeps from the first layer to the last and back, each sorting a layer by the mean
position of its neighbours in the layer just swept (the barycentre heuristic), then one
pass of adjacent swaps that each remove crossings (transposition). The best order seen
is kept. The number of sweeps is bounded, so a graph of hundreds of nodes costs a few
milliseconds per sweep, not a search.
"""

from __future__ import annotations

from workflows.admin.graph.layers import LayeredGraph

__all__ = ["crossings", "order_layers"]

# Down-and-up sweeps at most; they stop early once the edges cross nowhere, or after
# PATIENCE sweeps in a row that found no better order.
SWEEPS = 8
PATIENCE = 2
# Layers longer than this are not transposed: each pass is quadratic in the layer.
TRANSPOSE_LIMIT = 120


def _sort_by_barycentre(
    layer: list[int], neighbours: list[list[int]], position: list[float]
) -> None:
    """Sort ``layer`` in place by its items' neighbours' mean position; an item with
    none keeps its own, so it stays where it was."""
    keys = {}
    for item in layer:
        near = neighbours[item]
        own = position[item]
        keys[item] = (sum([position[n] for n in near]) / len(near) if near else own, own)
    layer.sort(key=keys.__getitem__)
    for index, item in enumerate(layer):
        position[item] = index


def _swap_gain(left: int, right: int, neighbours: list[list[int]], position: list[float]) -> int:
    """How many fewer crossings the edges of ``left`` and ``right`` towards one side
    make with the two swapped: pairs whose far ends are in the opposite order now,
    less those that would be after the swap."""
    gain = 0
    for a in neighbours[left]:
        far = position[a]
        for b in neighbours[right]:
            if far > position[b]:
                gain += 1
            elif far < position[b]:
                gain -= 1
    return gain


def _transpose(layer: list[int], graph: LayeredGraph, position: list[float]) -> None:
    """Swap neighbours in ``layer`` where that crosses fewer edges on both sides."""
    if len(layer) > TRANSPOSE_LIMIT:
        return
    for index in range(len(layer) - 1):
        left, right = layer[index], layer[index + 1]
        gain = _swap_gain(left, right, graph.preds, position)
        if gain + _swap_gain(left, right, graph.succs, position) > 0:
            layer[index], layer[index + 1] = right, left
            position[left], position[right] = index + 1, index


def crossings(graph: LayeredGraph, position: list[float]) -> int:
    """How many pairs of edges cross between adjacent layers: for edges sorted by their
    upper end, the inversions among their lower ends, counted with a Fenwick tree."""
    total = 0
    for layer in graph.layers[:-1]:
        ends = sorted((position[up], position[down]) for up in layer for down in graph.succs[up])
        size = max((int(end) for _, end in ends), default=0) + 2
        tree = [0] * (size + 1)
        for seen, (_, end) in enumerate(ends):
            index, below = int(end) + 1, 0
            probe = index
            while probe > 0:  # how many seen so far end at or above this one
                below += tree[probe]
                probe -= probe & -probe
            total += seen - below
            while index <= size:
                tree[index] += 1
                index += index & -index
    return total


def order_layers(graph: LayeredGraph) -> None:
    """Reorder ``graph.layers`` in place to cross few edges."""
    position: list[float] = [0.0] * len(graph.layer_of)
    for layer in graph.layers:
        for index, item in enumerate(layer):
            position[item] = index
    best = [list(layer) for layer in graph.layers]
    fewest = crossings(graph, position)
    stale = 0
    for _ in range(SWEEPS):
        if fewest == 0 or stale == PATIENCE:
            break
        for layer in graph.layers[1:]:
            _sort_by_barycentre(layer, graph.preds, position)
        for layer in reversed(graph.layers[:-1]):
            _sort_by_barycentre(layer, graph.succs, position)
        for layer in graph.layers:
            _transpose(layer, graph, position)
        now = crossings(graph, position)
        if now < fewest:
            best, fewest, stale = [list(layer) for layer in graph.layers], now, 0
        else:
            stale += 1
    graph.layers[:] = best
