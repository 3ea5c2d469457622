"""The graph drawing at flow sizes: laying out and rendering a flow page's member graph
(``workflows.admin.flow_graph.member_graph_svg``) of 30, 200 and 500 members.

Each flow is a seeded random DAG: member ``i`` waits for one to ``--fan-in`` members
among the ``--window`` before it (so edges skip columns and joins have several
upstreams). For each size the script prints the edges, the columns, the dummies (one
per column an edge skips), the crossings left, and the median, best and worst
milliseconds of ``--repeat`` renders (wall clock), and the median CPU milliseconds
(what a render costs when the machine is busy with other work too). The issue's goal
is a 200-member flow in under 200 ms; the script prints figures and asserts no timing.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[30, 200, 500])
    parser.add_argument("--repeat", type=int, default=7, help="renders per size")
    parser.add_argument("--window", type=int, default=40, help="how far back an upstream is")
    parser.add_argument("--fan-in", type=int, default=3, help="most upstreams of a member")
    parser.add_argument("--seed", type=int, default=37)
    return parser.parse_args(argv)


def flow_members(size: int, args: argparse.Namespace) -> list:
    from workflows.admin.flow_graph import MemberNode

    chance = random.Random(args.seed)
    nodes = []
    for index in range(size):
        pool = range(max(0, index - args.window), index)
        ups = chance.sample(pool, min(len(pool), chance.randint(1, args.fan_in)))
        nodes.append(
            MemberNode(
                name=f"member-{index}",
                after=tuple(f"member-{up}" for up in sorted(ups)),
                workflow="bench",
                status=chance.choice(["completed", "running", "blocked", "failed"]),
                join=f"all of {len(ups)}" if ups else "",
                href=f"/runs/{index}/",
            )
        )
    return nodes


def shape(nodes: list) -> dict[str, int]:
    """Edges, columns, dummies and crossings of the layout ``nodes`` get."""
    from workflows.admin.graph.layers import layered_graph
    from workflows.admin.graph.ordering import crossings, order_layers

    index = {node.name: position for position, node in enumerate(nodes)}
    graph = layered_graph(len(nodes), [[index[up] for up in node.after] for node in nodes])
    order_layers(graph)
    position = [0.0] * len(graph.layer_of)
    for layer in graph.layers:
        for row, item in enumerate(layer):
            position[item] = row
    return {
        "edges": len(graph.chains),
        "columns": len(graph.layers),
        "dummies": len(graph.layer_of) - graph.nodes,
        "crossings": crossings(graph, position),
    }


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flowsite.settings")
    import django

    django.setup()
    from workflows.admin.flow_graph import member_graph_svg

    print(f"python {platform.python_version()} on {platform.machine()}, {args.repeat} renders each")
    print(
        f"{'members':>8} {'edges':>6} {'columns':>7} {'dummies':>7} {'crossings':>9}"
        f" {'median ms':>9} {'best':>6} {'worst':>6} {'cpu ms':>6} {'svg kB':>6}"
    )
    for size in args.sizes:
        nodes = flow_members(size, args)
        times, cpu, svg = [], [], ""
        for _ in range(args.repeat):
            started, used = time.perf_counter(), time.process_time()
            svg = member_graph_svg(nodes, title=f"{size} members")
            times.append((time.perf_counter() - started) * 1000)
            cpu.append((time.process_time() - used) * 1000)
        facts = shape(nodes)
        print(
            f"{size:>8} {facts['edges']:>6} {facts['columns']:>7} {facts['dummies']:>7}"
            f" {facts['crossings']:>9} {statistics.median(times):>9.1f} {min(times):>6.1f}"
            f" {max(times):>6.1f} {statistics.median(cpu):>6.1f} {len(svg) / 1000:>6.0f}"
        )


if __name__ == "__main__":
    main()
