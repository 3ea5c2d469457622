"""Event consumers: the named readers of the history across runs, and their positions.

A consumer's position is the last event it acknowledged, in commit order
(``Event.xid``, ``Event.id``; see :mod:`workflows.queries.event_cursor`). What follows
the position is handed out again until it is acknowledged, so a consumer that crashes
before acknowledging gets the same events again: delivery is at least once.

The only writes are here: creating a consumer at the start of the history (with the
filter it keeps for life: the workflows and event types it reads, none for all), deleting
one, and moving its position forward with a compare-and-set on its ``version``. Reading
writes nothing: who may create a consumer is decided above (the services and surfaces,
``workflows.manage_consumers``); an acknowledgement creates one only when told to.
A position only moves forward: acknowledging one at or behind the current position
changes nothing and says so, and two acknowledgements racing end at the furthest of
the two.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.updates import cas_update
from workflows.engine.transaction import transition
from workflows.errors import ConsumerNotFound, StaleState
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
    workflow_names: tuple[str, ...] = ()
    event_types: tuple[str, ...] = ()

    @classmethod
    def of(cls, row: EventConsumer) -> ConsumerPosition:
        return cls(
            row.name,
            row.position_xid,
            row.position_id,
            row.version,
            row.acked_at,
            tuple(row.workflow_names),
            tuple(row.event_types),
        )


@dataclass(frozen=True)
class Acknowledgement:
    """What an acknowledgement did: the position now, and whether this call moved it."""

    position: ConsumerPosition
    moved: bool


def _created(
    name: str, workflow_names: tuple[str, ...] = (), event_types: tuple[str, ...] = ()
) -> tuple[EventConsumer, bool]:
    # An INSERT in a savepoint; losing the unique key to a concurrent create reads the
    # winner's row instead, so of racing creates exactly one says it created.
    return EventConsumer.objects.get_or_create(
        name=name,
        defaults={"workflow_names": list(workflow_names), "event_types": list(event_types)},
    )


def _existing(name: str) -> EventConsumer:
    row = EventConsumer.objects.filter(name=name).first()
    if row is None:
        raise ConsumerNotFound(f"no event consumer is named {name!r}", consumer=name)
    return row


@transition
def register_consumer(name: str) -> ConsumerPosition:
    """The consumer ``name``, registered at the start of the history if it is new.

    Two processes registering the same name at once both get the one consumer.
    """
    return ConsumerPosition.of(_created(name)[0])


@transition
def create_consumer(
    name: str, workflow_names: tuple[str, ...] = (), event_types: tuple[str, ...] = ()
) -> tuple[ConsumerPosition, bool]:
    """The consumer ``name`` and whether this call created it (at the start of the
    history, reading only ``workflow_names`` and ``event_types`` when given); of
    concurrent creates of one name exactly one says ``True``, and an existing consumer
    keeps the filter it has (the caller compares)."""
    row, created = _created(name, workflow_names, event_types)
    return ConsumerPosition.of(row), created


@transition
def delete_consumer(name: str) -> ConsumerPosition:
    """Delete the consumer ``name``; its position as it was. Raises
    :class:`ConsumerNotFound` if there is none (a concurrent delete won)."""
    row = _existing(name)
    deleted, _ = EventConsumer.objects.filter(name=name).delete()
    if not deleted:
        raise ConsumerNotFound(f"no event consumer is named {name!r}", consumer=name)
    return ConsumerPosition.of(row)


@transition
def acknowledge(name: str, xid: int, event_id: int, *, create: bool = True) -> Acknowledgement:
    """Move consumer ``name`` to the event ``(xid, event_id)``; a new name is created
    first if ``create``, else :class:`ConsumerNotFound`.

    A compare-and-set on the consumer's ``version``: losing it to a concurrent
    acknowledgement means reading again and, if the position is still behind, trying
    again. At or behind the current position it changes nothing (``moved=False``).
    Raises :class:`StaleState` if other acknowledgements keep winning every round.
    """
    target = (xid, event_id)
    row = _created(name)[0] if create else _existing(name)
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
            return Acknowledgement(ConsumerPosition.of(_existing(name)), True)
        row = _existing(name)
    raise StaleState(
        f"consumer {name!r} was acknowledged concurrently {_ACK_ROUNDS} times in a row; "
        "nothing was written, try again",
        consumer=name,
    )
