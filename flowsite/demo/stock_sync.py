"""The demo's flow: a stock sync whose members, once the worker has run them, show every
state a flow member takes.

Three supplier feeds are fetched in parallel; initech's feed is retired, so its member
fails. What needs it shows the two ways a failure travels down a flow: ``restock-initech``
(join ``all``) is cancelled with ``dependency_failed``, while ``initech-catalogue`` (join
``any``) stays ``blocked``, because the flow is left open and another initech source may
still be added to it (``manage.py workflows_flow add`` and ``edge`` do that).
``shop-prices`` (join ``any`` of all three feeds) starts as soon as one of them has
completed, and ``warehouse-stock`` (join ``all`` of the two good feeds) completes.

Built by ``manage.py demo_setup`` through the public flow verbs, idempotently: the flow's
key and the members' names make a second run add nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import workflows

if TYPE_CHECKING:
    from workflows.models import Flow
    from workflows.permissions import AnyUser

NAME = "stock sync"
KEY = "demo-stock-sync"


@dataclass(frozen=True)
class Member:
    """One member of the flow: its run's workflow and input, and what it waits for."""

    name: str
    workflow: str
    input: dict[str, Any]
    after: tuple[str, ...] = ()
    join: str = "all"


# In the order they are added: every member's upstream members come before it.
MEMBERS = (
    Member("feed-acme", "supplier_feed", {"supplier": "acme"}),
    Member("feed-globex", "supplier_feed", {"supplier": "globex"}),
    Member("feed-initech", "supplier_feed", {"supplier": "initech", "feed": "retired"}),
    Member(
        "warehouse-stock",
        "stock_update",
        {"target": "warehouse"},
        after=("feed-acme", "feed-globex"),
    ),
    Member(
        "shop-prices",
        "stock_update",
        {"target": "shop prices"},
        after=("feed-acme", "feed-globex", "feed-initech"),
        join="any",
    ),
    Member(
        "restock-initech",
        "stock_update",
        {"target": "initech reorders"},
        after=("feed-initech",),
    ),
    Member(
        "initech-catalogue",
        "stock_update",
        {"target": "initech catalogue"},
        after=("feed-initech",),
        join="any",
    ),
)


def build_stock_sync(user: AnyUser | None = None) -> Flow:
    """The demo flow with all its members (the same flow again on a second call); left
    open, so that ``initech-catalogue`` stays blocked rather than cancelled."""
    flow = workflows.create_flow(NAME, key=KEY, user=user)
    for member in MEMBERS:
        workflows.add_to_flow(
            flow,
            member.workflow,
            member.input,
            member=member.name,
            after=member.after,
            join=member.join,
            user=user,
        )
    return flow
