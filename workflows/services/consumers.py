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

A consumer created with ``workflows=`` and ``kinds=`` (event types) reads only those
events and its lag counts only them; the filter is the consumer's for life (delete it
and create it again to change it). Acknowledging what it reads moves it past the events
it does not read too, so they never hold it back.
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
from workflows.engine.event_types import EVENT_TYPES
from workflows.errors import ConsumerNotFound, InvalidInput
from workflows.queries.consumers import (
    EVERYTHING,
    ConsumedEvent,
    EventFilter,
    consumer_reading,
    next_events,
)
from workflows.queries.event_cursor import Position, decode_cursor, encode_cursor
from workflows.queries.long_poll import long_poll
from workflows.services.access import VERBS
from workflows.validation import check_text

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from workflows.permissions import AnyUser

__all__ = [
    "MAX_CONSUME_LIMIT",
    "MAX_FILTER_VALUES",
    "AckResult",
    "ConsumerCreated",
    "ack",
    "consume",
    "create_consumer",
    "delete_consumer",
    "event_filter",
]

# The most events one ``consume`` returns.
MAX_CONSUME_LIMIT = 1000
# Matches ``EventConsumer.name``.
_NAME_LIMIT = 200
# The most workflow names, or event types, one consumer's filter lists.
MAX_FILTER_VALUES = 100
# Matches ``Run.workflow_name``.
_WORKFLOW_NAME_LIMIT = 200


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
    reading = consumer_reading(name)
    if reading is None:
        if not create:
            raise ConsumerNotFound(f"no event consumer is named {name!r}", consumer=name)
        registered = register_consumer(name)
        reading = Position(registered.xid, registered.id), EVERYTHING
    start, event_filter = reading
    return long_poll(
        ["events"], lambda: next_events(start, limit, event_filter), until=bool, timeout=wait
    )


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
    (``False``: it existed already, unchanged); ``workflows``/``kinds`` its filter."""

    consumer: str
    cursor: str
    version: int
    created: bool
    workflows: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()


def _filter_values(
    values: object, field: str, check: Callable[[str], str | None]
) -> tuple[str, ...]:
    """``values`` as a sorted tuple without repeats; :class:`InvalidInput` naming
    ``field`` and the value ``check`` refuses (it returns why)."""
    if isinstance(values, str) or not isinstance(values, (list, tuple, set, frozenset)):
        raise InvalidInput(
            f"{field} must be a list of names, not {type(values).__name__}", field=field
        )
    if len(values) > MAX_FILTER_VALUES:
        raise InvalidInput(f"{field} lists at most {MAX_FILTER_VALUES} names", field=field)
    for value in values:
        problem = check(value) if isinstance(value, str) else "is not a string"
        if problem:
            raise InvalidInput(f"{field}: {value!r} {problem}", field=field)
    return tuple(sorted(set(values)))


def _workflow_problem(value: str) -> str | None:
    if not value.strip():
        return "is blank: name a workflow"
    if len(value) > _WORKFLOW_NAME_LIMIT:
        return f"is longer than {_WORKFLOW_NAME_LIMIT} characters"
    return None


def _kind_problem(value: str) -> str | None:
    if value in EVENT_TYPES:
        return None
    return "is no event type (the event reference lists them, e.g. 'run.completed')"


def event_filter(workflows: Iterable[str] = (), kinds: Iterable[str] = ()) -> EventFilter:
    """The filter of a consumer reading the events of ``workflows`` (names) and of
    ``kinds`` (event types, as events carry them in ``type``); empty: everything.

    Raises :class:`InvalidInput` naming ``workflows`` (not a list, a blank or too long
    name) or ``kinds`` (not a list, a type no event has). A workflow name is not checked
    against the deployed workflows: the history keeps the events of retired ones.
    """
    return EventFilter(
        _filter_values(workflows, "workflows", _workflow_problem),
        _filter_values(kinds, "kinds", _kind_problem),
    )


def create_consumer(
    consumer: str,
    *,
    workflows: Iterable[str] = (),
    kinds: Iterable[str] = (),
    user: AnyUser | None = None,
) -> ConsumerCreated:
    """Create the consumer ``consumer`` at the start of the history (the first
    :func:`consume` returns the oldest events); an existing one is left as it is.

    ``workflows``, ``kinds``: read only the events of runs of these workflows and of
    these event types (:func:`event_filter`); the filter is kept for the consumer's life.
    Creating an existing name again with another filter is refused
    (:class:`InvalidInput` naming ``consumer``): delete it first.
    ``user``: who asks; they must hold ``workflows.manage_consumers``, else
    ``PermissionDenied`` (``None``: trusted code). Of concurrent creates of one name
    exactly one says ``created``.
    """
    name = _consumer_name(consumer)
    wanted = event_filter(workflows, kinds)
    VERBS["create_consumer"].check_named(user)
    row, created = create_consumer_row(name, wanted.workflows, wanted.kinds)
    kept = EventFilter(row.workflow_names, row.event_types)
    if kept != wanted:
        raise InvalidInput(
            f"consumer {name!r} exists with another filter (workflows {list(kept.workflows)}, "
            f"kinds {list(kept.kinds)}); delete it and create it again to change it",
            field="consumer",
        )
    return ConsumerCreated(name, _cursor(row), row.version, created, kept.workflows, kept.kinds)


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
