"""Event consumers: ``workflows.consume``, ``workflows.ack``, ``create_consumer`` and
``delete_consumer``.

A consumer is a name. ``consume(name)`` returns the events after its acknowledged
position, of every run, in commit order (never skipping one that commits after an event
with a higher id, :mod:`workflows.queries.event_cursor`). ``ack(name, cursor)`` moves the
position to the event that cursor came with. Until then the same events come again: a
consumer that crashes between handling and acknowledging handles them again (at least
once), and consumers never see each other's positions.

Reads write nothing. A consumer is a row the console's Consumers page and every
Prometheus scrape read, so one is created only on purpose: by :func:`create_consumer`,
by ``consume``/``ack`` in code (trusted, like every verb called with no user), or over
HTTP by ``POST /api/events/consumers/`` or a first acknowledgement of a caller holding
``workflows.manage_consumers``. ``consume(name, create=False)`` (what
``GET /api/events/?consumer=`` calls) raises :class:`ConsumerNotFound` for a new name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from workflows.engine.consumers import (
    ConsumerPosition,
    acknowledge,
    create_consumer as create_consumer_row,
    delete_consumer as delete_consumer_row,
    register_consumer,
)
from workflows.errors import ConsumerNotFound, InvalidInput
from workflows.queries.consumers import ConsumedEvent, consumer_position, next_events
from workflows.queries.event_cursor import Position, decode_cursor, encode_cursor
from workflows.queries.long_poll import long_poll
from workflows.services.access import VERBS
from workflows.validation import check_text

if TYPE_CHECKING:
    from workflows.permissions import AnyUser

__all__ = [
    "MAX_CONSUME_LIMIT",
    "AckResult",
    "ConsumerCreated",
    "ack",
    "consume",
    "create_consumer",
    "delete_consumer",
]

# The most events one ``consume`` returns.
MAX_CONSUME_LIMIT = 1000
# Matches ``EventConsumer.name``.
_NAME_LIMIT = 200


def _consumer_name(consumer: object) -> str:
    name = check_text(consumer, field="consumer", limit=_NAME_LIMIT)
    if not name.strip():
        raise InvalidInput("consumer must be a name, not blank", field="consumer")
    return name


def consume(
    consumer: str, limit: int = 100, *, wait: float = 0.0, create: bool = True
) -> list[ConsumedEvent]:
    """The next events (at most ``limit``) after ``consumer``'s acknowledged position.

    Each carries its ``id`` and its ``cursor``, which :func:`ack` takes. ``wait``: when
    there is none yet, wait up to this many seconds for one to commit (woken by the
    ``events`` topic, with a backstop poll); ``[]`` if none came. A new name is created
    at the start of the history, unless ``create=False``: then it raises
    :class:`ConsumerNotFound` and writes nothing.
    Raises :class:`InvalidInput` naming ``consumer`` or ``limit``.
    """
    name = _consumer_name(consumer)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_CONSUME_LIMIT:
        raise InvalidInput(
            f"limit must be a whole number from 1 to {MAX_CONSUME_LIMIT}", field="limit"
        )
    position = consumer_position(name)
    if position is None:
        if not create:
            raise ConsumerNotFound(f"no event consumer is named {name!r}", consumer=name)
        registered = register_consumer(name)
        position = Position(registered.xid, registered.id)
    start = position
    return long_poll(["events"], lambda: next_events(start, limit), until=bool, timeout=wait)


@dataclass(frozen=True)
class AckResult:
    """An acknowledgement: the consumer's position now (its ``cursor``), its
    ``version``, and whether this call moved it (``False``: it was there or further)."""

    consumer: str
    cursor: str
    version: int
    moved: bool


def ack(consumer: str, cursor: str, *, create: bool = True) -> AckResult:
    """Move ``consumer`` past the event ``cursor`` came with (and every one before it).

    Forward only: a cursor at or behind the position changes nothing (``moved`` is
    ``False``). A new name is created by this first acknowledgement, unless
    ``create=False`` (:class:`ConsumerNotFound`). Raises :class:`InvalidInput` naming
    ``cursor`` for one this server did not issue, or ``consumer`` for a bad name.
    """
    name = _consumer_name(consumer)
    position = decode_cursor(cursor)
    done = acknowledge(name, position.xid, position.id, create=create)
    now = Position(done.position.xid, done.position.id)
    return AckResult(
        consumer=name, cursor=encode_cursor(now), version=done.position.version, moved=done.moved
    )


@dataclass(frozen=True)
class ConsumerCreated:
    """A consumer as :func:`create_consumer` left it, and whether that call created it
    (``False``: it existed already, unchanged)."""

    consumer: str
    cursor: str
    version: int
    created: bool


def create_consumer(consumer: str, *, user: AnyUser | None = None) -> ConsumerCreated:
    """Create the consumer ``consumer`` at the start of the history (the first
    :func:`consume` returns the oldest events); an existing one is left as it is.

    ``user``: who asks; they must hold ``workflows.manage_consumers``, else
    ``PermissionDenied`` (``None``: trusted code). Of concurrent creates of one name
    exactly one says ``created``.
    """
    name = _consumer_name(consumer)
    VERBS["create_consumer"].check_named(user)
    row, created = create_consumer_row(name)
    return ConsumerCreated(name, _cursor(row), row.version, created)


def delete_consumer(consumer: str, *, user: AnyUser | None = None) -> str:
    """Delete the consumer ``consumer``; the cursor it had acknowledged. Its events stay
    (they belong to their runs); creating the name again starts at the beginning.

    ``user`` as for :func:`create_consumer`. Raises :class:`ConsumerNotFound`.
    """
    name = _consumer_name(consumer)
    VERBS["delete_consumer"].check_named(user)
    return _cursor(delete_consumer_row(name))


def _cursor(row: ConsumerPosition) -> str:
    return encode_cursor(Position(row.xid, row.id))
