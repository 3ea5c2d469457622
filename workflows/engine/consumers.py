"""Event consumers: the named readers of the history across runs, and their positions.

A consumer's position is the last event it acknowledged, in commit order
(``Event.xid``, ``Event.id``; see :mod:`workflows.queries.event_cursor`). What follows
the position is handed out again until it is acknowledged, so a consumer that crashes
before acknowledging gets the same events again: delivery is at least once.

The only writes are here: registering a consumer at the start (first use), and moving
its position forward with a compare-and-set on its ``version``. A position only moves
forward: acknowledging one at or behind the current position changes nothing and says
so, and two acknowledgements racing end at the furthest of the two.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.updates import cas_update
from workflows.engine.transaction import transition
from workflows.errors import StaleState
from workflows.models import EventConsumer

# Compare-and-set rounds before an acknowledgement gives up; each lost round means
# another acknowledgement of the same consumer committed in between.
_ACK_ROUNDS = 10


@dataclass(frozen=True)
class ConsumerPosition:
    """A consumer's acknowledged position (``xid``, ``id``: 0, 0 before any event)."""

    name: str
    xid: int
    id: int
    version: int
    acked_at: datetime | None

    @classmethod
    def of(cls, row: EventConsumer) -> ConsumerPosition:
        return cls(row.name, row.position_xid, row.position_id, row.version, row.acked_at)


@dataclass(frozen=True)
class Acknowledgement:
    """What an acknowledgement did: the position now, and whether this call moved it."""

    position: ConsumerPosition
    moved: bool


def _registered(name: str) -> EventConsumer:
    # INSERT ... ON CONFLICT DO NOTHING: a consumer registered concurrently is no error.
    EventConsumer.objects.bulk_create([EventConsumer(name=name)], ignore_conflicts=True)
    return EventConsumer.objects.get(name=name)


@transition
def register_consumer(name: str) -> ConsumerPosition:
    """The consumer ``name``, registered at the start of the history if it is new.

    Two processes registering the same name at once both get the one consumer.
    """
    return ConsumerPosition.of(_registered(name))


@transition
def acknowledge(name: str, xid: int, event_id: int) -> Acknowledgement:
    """Move consumer ``name`` (registered if new) to the event ``(xid, event_id)``.

    A compare-and-set on the consumer's ``version``: losing it to a concurrent
    acknowledgement means reading again and, if the position is still behind, trying
    again. At or behind the current position it changes nothing (``moved=False``).
    Raises :class:`StaleState` if other acknowledgements keep winning every round.
    """
    target = (xid, event_id)
    row = _registered(name)
    for _ in range(_ACK_ROUNDS):
        if (row.position_xid, row.position_id) >= target:
            return Acknowledgement(ConsumerPosition.of(row), moved=False)
        if cas_update(
            EventConsumer,
            name,
            version=row.version,
            position_xid=xid,
            position_id=event_id,
            acked_at=db_now(),
        ):
            return Acknowledgement(ConsumerPosition.of(EventConsumer.objects.get(name=name)), True)
        row = EventConsumer.objects.get(name=name)
    raise StaleState(
        f"consumer {name!r} was acknowledged concurrently {_ACK_ROUNDS} times in a row; "
        "nothing was written, try again",
        consumer=name,
    )
