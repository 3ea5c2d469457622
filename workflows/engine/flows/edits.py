"""Only verbs end members: a graph edit that would cancel a member at once.

An edit (``add_dependency``, ``set_join``, ``seal_flow``, ``add_to_flow(after=...)``)
decides the members it touches. When one's join can no longer be met (an edge from a
member that ended otherwise, a join no upstream set can satisfy), deciding it cancels it
with ``dependency_failed``: that ends a run, which only callers who may operate runs may
do. So the edit is refused with :class:`~workflows.errors.InvalidFlowChange` naming the
member, unless ``may_end_members`` (asked only then) says the caller may; then it
happens and the cancellation names the caller. ``may_end_members=None`` is trusted
code (``user=None`` in a Python call), allowed as for every other verb.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from workflows.engine.events import actor
from workflows.errors import InvalidFlowChange

if TYPE_CHECKING:
    from workflows.models import FlowMember
    from workflows.permissions import AnyUser


@dataclass(frozen=True)
class FlowEdit:
    """The graph edit deciding members: its verb, its caller, whether it may end them."""

    verb: str
    user: AnyUser | None = None
    may_end_members: Callable[[], bool] | None = None

    @property
    def by(self) -> str | None:
        """The caller, as the history names it."""
        return actor(self.user)

    def check_may_end(self, member: FlowMember, why: str) -> None:
        """Refuse the edit, naming ``member``, unless its caller may end members."""
        if self.may_end_members is None or self.may_end_members():
            return
        raise InvalidFlowChange(
            f"{self.verb} would cancel member {member.name!r} at once ({why}); only a caller "
            "who may operate runs can make that change",
            member=member.name,
            verb=self.verb,
        )
