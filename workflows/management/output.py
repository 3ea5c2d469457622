"""How operator commands print: aligned tables for people, JSON for scripts.

Kept in one place so every ``workflows_*`` command formats times, empty values and
nested JSON the same way, and ``--json`` output of every command parses alike.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.utils import timezone

from workflows.status import DecisionVia


def cell(value: Any) -> str:
    """Format one value for a table: ``-`` for nothing, times to the second, compact JSON.

    Newlines become spaces so that a multi-line error message cannot break the table.
    """
    if value is None or value == "":
        return "-"
    if isinstance(value, datetime):
        moment = timezone.localtime(value) if timezone.is_aware(value) else value
        return moment.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, separators=(",", ":"), cls=DjangoJSONEncoder)
    return str(value).replace("\n", " ")


def table(headers: Collection[str], rows: Iterable[Sequence[Any]]) -> str:
    """Return ``rows`` as left-aligned columns under ``headers``, two spaces apart."""
    lines = [list(headers), *([cell(value) for value in row] for row in rows)]
    widths = [max(len(line[column]) for line in lines) for column in range(len(headers))]
    return "\n".join(
        "  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


class _Encoder(DjangoJSONEncoder):
    """Django's encoder (datetimes, UUIDs, decimals) plus dataclasses such as scan results."""

    def default(self, o: Any) -> Any:
        if dataclasses.is_dataclass(o) and not isinstance(o, type):
            return dataclasses.asdict(o)
        return super().default(o)


def to_json(data: Any) -> str:
    """Return ``data`` as indented JSON, the format of every command's ``--json``."""
    return json.dumps(data, cls=_Encoder, indent=2)


# How much of an event's payload a line shows.
PAYLOAD_WIDTH = 80


def payload_summary(payload: dict[str, Any]) -> str:
    """One line of ``key=value`` pairs, cut at ``PAYLOAD_WIDTH`` (``--json`` has it all)."""
    text = " ".join(f"{key}={cell(value)}" for key, value in payload.items())
    return text if len(text) <= PAYLOAD_WIDTH else text[: PAYLOAD_WIDTH - 1] + "…"


def run_line(run: dict[str, Any]) -> str:
    """One line saying which run a command acted on and where it stands now.

    ``run`` is a :func:`workflows.queries.run_summary`.
    """
    return f"run {run['id']} of {run['workflow']} v{run['version']}: {run['status']}"


def step_line(step: dict[str, Any]) -> str:
    """One line saying which step a command acted on, in which run, and where it stands now.

    ``step`` is a :func:`workflows.queries.step_summary`; the id is printed because the
    step commands take it, and a gate's decision because it is what changed.
    """
    line = (
        f"step {step['id']} {step['name']!r} ({step['kind']}) of run {step['run']}: "
        f"{step['status']}"
    )
    if step["decision"]:
        line += f", {step['decision']}"
        if step["decided_by"]:
            line += f" by {step['decided_by']}"
        if step["decided_via"] == DecisionVia.OVERRIDE:
            line += ", overriding the gate's rule"
        elif step["decided_via"] == DecisionVia.SKIP:
            line += " (skipped)"
    return line
