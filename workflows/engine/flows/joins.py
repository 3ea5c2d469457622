"""When a blocked member may start: its join rule, and the rule's verdict."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from workflows.errors import InvalidInput
from workflows.status import RUN_FINAL, JoinKind, RunStatus

# The largest k a join may name: what every database stores in FlowMember.join_count.
_LARGEST_COUNT = 2**31 - 1

JoinSpec = str | int
"""How a caller names a join: ``"all"``, ``"any"``, or an int k (at least k)."""


class Verdict(enum.Enum):
    """What the upstreams' statuses say of a blocked member."""

    SATISFIED = "satisfied"
    IMPOSSIBLE = "impossible"
    WAITING = "waiting"


@dataclass(frozen=True)
class JoinRule:
    """A member's join: ``kind`` and, for ``at_least``, its ``count``."""

    kind: JoinKind
    count: int | None = None

    @classmethod
    def parse(cls, join: JoinSpec) -> JoinRule:
        """The rule a caller names, or :class:`InvalidInput` saying what is accepted."""
        if isinstance(join, bool) or not isinstance(join, int | str):
            raise InvalidInput(
                f'join must be "all", "any" or a positive int, not {join!r}', field="join"
            )
        if isinstance(join, int):
            if not 1 <= join <= _LARGEST_COUNT:
                raise InvalidInput(
                    f"join must be from 1 to {_LARGEST_COUNT}, not {join}", field="join"
                )
            return cls(JoinKind.AT_LEAST, join)
        if join not in (JoinKind.ALL, JoinKind.ANY):
            raise InvalidInput(
                f'join must be "all", "any" or a positive int, not {join!r}', field="join"
            )
        return cls(JoinKind(join))

    @classmethod
    def stored(cls, kind: str, count: int | None) -> JoinRule:
        """The rule of a member row."""
        return cls(JoinKind(kind), count)

    @property
    def spec(self) -> JoinSpec:
        """The rule as a caller names it (what the API and the history show)."""
        return self.count if self.kind == JoinKind.AT_LEAST and self.count else str(self.kind)

    def verdict(self, statuses: Iterable[str], *, more_may_come: bool) -> Verdict:
        """What the upstreams' ``statuses`` say: satisfied once enough completed,
        impossible once too many ended otherwise, else waiting.

        ``all``: every upstream completed (none at all: satisfied, the member starts at
        once), impossible once one ended otherwise. ``any``: one completed, impossible
        once all ended otherwise. ``at_least k``: k completed, impossible once fewer
        than k could still complete. ``any`` and ``at_least`` follow one rule about an
        open flow: they are judged impossible only when ``more_may_come`` is false (the
        flow is sealed or cancelled), as an open flow may still give the member more
        upstreams; until then they wait.
        """
        seen = list(statuses)
        completed = sum(status == RunStatus.COMPLETED for status in seen)
        ended_otherwise = sum(
            status in RUN_FINAL and status != RunStatus.COMPLETED for status in seen
        )
        if self.kind == JoinKind.ALL:
            if completed == len(seen):
                return Verdict.SATISFIED
            return Verdict.IMPOSSIBLE if ended_otherwise else Verdict.WAITING
        if self.kind == JoinKind.ANY:
            if completed or not seen:
                return Verdict.SATISFIED
            if not more_may_come and ended_otherwise == len(seen):
                return Verdict.IMPOSSIBLE
            return Verdict.WAITING
        needed = self.count or 0
        if completed >= needed:
            return Verdict.SATISFIED
        if not more_may_come and len(seen) - ended_otherwise < needed:
            return Verdict.IMPOSSIBLE
        return Verdict.WAITING

    def describe(self) -> str:
        """In words: "all of its upstream members", "any one", "at least 2"."""
        if self.kind == JoinKind.ALL:
            return "all of its upstream members completed"
        if self.kind == JoinKind.ANY:
            return "any one of its upstream members completed"
        return f"at least {self.count} of its upstream members completed"
