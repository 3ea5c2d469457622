"""What a bulk reports: one small tuple per run (:class:`BulkItem`) or per unit of work
(:class:`UnitItem`), and the totals (:class:`BulkResult`).

Shared by the bulk over runs (:mod:`workflows.services.bulk`) and the bulk over stuck
units (:mod:`workflows.services.bulk_units`), and by every surface that prints them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = ["DONE", "ELIGIBLE", "FAILED", "SKIPPED", "BulkItem", "BulkResult", "UnitItem"]

ELIGIBLE = "eligible"
SKIPPED = "skipped"
DONE = "done"
FAILED = "failed"


class BulkItem(NamedTuple):
    """What happened to one run: a tuple of strings, so 10,000 of them stay small.

    ``status`` is the run's status as the bulk read it, or its new status for a run the
    verb was ``done`` with; empty for an id that names no run. ``reason`` says why a run
    was skipped, or is the error message of a ``failed`` one, whose ``code`` is the
    error's stable code (``permission_denied`` for ``PermissionDenied``).
    """

    run: str
    status: str
    outcome: str
    reason: str = ""
    code: str = ""


class UnitItem(NamedTuple):
    """What happened to one unit of work (a step, a fan-out item or a compensation).

    ``unit`` is its id (of its ``kind``: a ``Step``, ``FanOutItem`` or
    ``CompensationRecord``), named for a person by ``run``, ``step`` and ``item`` (an
    item's key, or the key of the item a compensation undoes; empty otherwise).
    ``attempt`` is the attempt the bulk read (within the step's round, 0 if never
    started), the one the verb was pinned to. ``status``, ``outcome``, ``reason`` and
    ``code`` as in :class:`BulkItem`.
    """

    kind: str
    unit: int
    run: str
    step: str
    item: str
    status: str
    attempt: int
    outcome: str
    reason: str = ""
    code: str = ""


@dataclass
class BulkResult:
    """Totals of a bulk, and its per-run (or per-unit) results unless ``keep_items`` is false.

    ``matched`` counts the runs (or units) selected (for a list of ids, each distinct id);
    a dry run splits them into ``eligible`` and ``skipped``, an applied one into
    ``done``, ``skipped`` and ``failed``. ``units``: the kind of units a bulk over units
    selected (``step``, ``item``, ``compensation``); empty for a bulk over runs.
    """

    verb: str
    dry_run: bool
    keep_items: bool = True
    units: str = ""
    matched: int = 0
    eligible: int = 0
    done: int = 0
    skipped: int = 0
    failed: int = 0
    items: list[BulkItem | UnitItem] = field(default_factory=list)

    def add(self, item: BulkItem | UnitItem) -> None:
        """Count ``item`` (and keep it, if this result keeps items)."""
        self.matched += 1
        if item.outcome == ELIGIBLE:
            self.eligible += 1
        elif item.outcome == DONE:
            self.done += 1
        elif item.outcome == FAILED:
            self.failed += 1
        else:
            self.skipped += 1
        if self.keep_items:
            self.items.append(item)

    def totals(self) -> dict[str, int]:
        """The counts that apply to this kind of bulk, for printing and JSON."""
        if self.dry_run:
            return {"matched": self.matched, "eligible": self.eligible, "skipped": self.skipped}
        return {
            "matched": self.matched,
            "done": self.done,
            "skipped": self.skipped,
            "failed": self.failed,
        }
