"""Event consumers: ``workflows.consume`` and ``workflows.ack``.

A consumer is a name. ``consume(name)`` returns the events after its acknowledged
position, of every run, in commit order (never skipping one that commits after an event
with a higher id, :mod:`workflows.queries.event_cursor`); the first call registers the
consumer at the start of the history. ``ack(name, cursor)`` moves the position to the
event that cursor came with. Until then the same events come again: a consumer that
crashes between handling and acknowledging handles them again (at least once), and
consumers never see each other's positions.
"""

from __future__ import annotations

from dataclasses import dataclass

from workflows.engine.consumers import acknowledge, register_consumer
from workflows.errors import InvalidInput
from workflows.queries.consumers import ConsumedEvent, consumer_position, next_events
from workflows.queries.event_cursor import Position, decode_cursor, encode_cursor
from workflows.queries.long_poll import long_poll
from workflows.validation import check_text

__all__ = ["MAX_CONSUME_LIMIT", "AckResult", "ack", "consume"]

# The most events one ``consume`` returns.
MAX_CONSUME_LIMIT = 1000
# Matches ``EventConsumer.name``.
_NAME_LIMIT = 200


def _consumer_name(consumer: object) -> str:
    name = check_text(consumer, field="consumer", limit=_NAME_LIMIT)
    if not name.strip():
        raise InvalidInput("consumer must be a name, not blank", field="consumer")
    return name


def consume(consumer: str, limit: int = 100, *, wait: float = 0.0) -> list[ConsumedEvent]:
    """The next events (at most ``limit``) after ``consumer``'s acknowledged position.

    Each carries its ``id`` and its ``cursor``, which :func:`ack` takes. ``wait``: when
    there is none yet, wait up to this many seconds for one to commit (woken by the
    ``events`` topic, with a backstop poll); ``[]`` if none came.
    Raises :class:`InvalidInput` naming ``consumer`` or ``limit``.
    """
    name = _consumer_name(consumer)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_CONSUME_LIMIT:
        raise InvalidInput(
            f"limit must be a whole number from 1 to {MAX_CONSUME_LIMIT}", field="limit"
        )
    position = consumer_position(name)
    if position is None:
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


def ack(consumer: str, cursor: str) -> AckResult:
    """Move ``consumer`` past the event ``cursor`` came with (and every one before it).

    Forward only: a cursor at or behind the position changes nothing (``moved`` is
    ``False``). Raises :class:`InvalidInput` naming ``cursor`` for one this server did
    not issue, or ``consumer`` for a bad name.
    """
    name = _consumer_name(consumer)
    position = decode_cursor(cursor)
    done = acknowledge(name, position.xid, position.id)
    now = Position(done.position.xid, done.position.id)
    return AckResult(
        consumer=name, cursor=encode_cursor(now), version=done.position.version, moved=done.moved
    )
