"""The live regions of the run page and the flow page: which parts of a page change while
its run or flow goes on, the template fragment each is rendered from, and the
fingerprint that says whether anything they show may have changed.

A page includes each region's fragment inside ``<div data-live-region="<name>">``;
the live endpoint (:mod:`.pages`) renders the same fragments with the same context, so
the page and its updates show the same markup. ``workflows/live_page.js`` swaps them
in while the page is open.

A fingerprint is built from version counters the engine moves on every write (each
compare-and-set bumps a row's ``version``): a run's version and status with the count
and the sum of its steps' versions; a flow's version, status and revision with its
members' runs counted by status. It is cheap to read (one or two queries) and changes
whenever a region may show something new, including a step's progress.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.http import HttpRequest
from django.template.loader import render_to_string

from workflows.status import FLOW_FINAL, RUN_FINAL

__all__ = [
    "FLOW_REGIONS",
    "POLL_INTERVAL_MS",
    "RUN_REGIONS",
    "flow_fingerprint",
    "flow_settled",
    "region_templates",
    "render_regions",
    "run_fingerprint",
]

# How often the page asks whether its run or flow moved (live_page.js reads it from
# the page): often enough to see a step start, rare enough to cost little.
POLL_INTERVAL_MS = 1500

# The regions in page order; each is ``workflows/admin/<page>/<name>.html``.
RUN_REGIONS = (
    "head",
    "explain",
    "live",
    "error",
    "graph",
    "loops",
    "steps",
    "errors",
    "fanouts",
    "io",
)
FLOW_REGIONS = ("head", "summary", "graph", "members")


def region_templates(page: str, names: tuple[str, ...]) -> list[tuple[str, str]]:
    """Each region's name with the fragment it is rendered from, in page order."""
    return [(name, f"workflows/admin/{page}/{name}.html") for name in names]


def render_regions(
    request: HttpRequest, page: str, names: tuple[str, ...], context: Mapping[str, Any]
) -> dict[str, str]:
    """Each region's markup, rendered from its fragment as the page renders it."""
    return {
        name: render_to_string(template, dict(context), request)
        for name, template in region_templates(page, names)
    }


def run_fingerprint(version: int, status: str, steps: int | None, step_versions: int | None) -> str:
    """The run's marks: any write to the run or to one of its steps changes them."""
    return f"{version}.{status}.{steps or 0}.{step_versions or 0}"


def flow_fingerprint(
    version: int, status: str, revision: int, member_statuses: Mapping[str, int]
) -> str:
    """The flow's marks: a change to the flow, its graph, or a member's status changes
    them."""
    counted = ",".join(f"{status}:{count}" for status, count in sorted(member_statuses.items()))
    return f"{version}.{status}.{revision}.{counted}"


def flow_settled(status: str, member_statuses: Mapping[str, int]) -> bool:
    """Whether the flow page has nothing more to show: the flow ended and so did every
    member (a cancelled flow's members may still be ending)."""
    return status in FLOW_FINAL and all(member in RUN_FINAL for member in member_statuses)
