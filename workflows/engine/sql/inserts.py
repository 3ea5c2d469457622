"""Multi-row inserts: the steps of a new run, the events of a transition."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, NamedTuple
from uuid import UUID

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone

from workflows.engine.sql.adapters import Adapter, field_prep
from workflows.engine.sql.connection import engine_connection
from workflows.engine.sql.execute import execute
from workflows.engine.sql.identifiers import column, table
from workflows.models import Event


def insert_rows(model: type[models.Model], rows: Sequence[dict[str, Any]]) -> None:
    """Insert ``rows`` (field name → value) with one multi-row ``INSERT``, as
    ``bulk_create`` would: a field a row leaves out gets its default, ``auto_now`` and
    ``auto_now_add`` fields the time of the call. The primary key must be automatic, and
    a default that differs from row to row (a UUID, a time) must be given in every row:
    defaults are adapted once per model (:func:`_default_row`).

    For the steps of a new run: ``bulk_create`` spent most of a run start preparing the
    thirty-odd values of each step through the ORM's compiler.
    """
    connection = engine_connection()
    native_uuid = connection.features.has_native_uuid_field
    template = _default_row(model, connection.vendor, native_uuid)
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    positions = _insert_positions(model)
    params: list[Any] = []
    for row in rows:
        values = [now if value is _NOW_PLACEHOLDER else value for value in template]
        for name, value in row.items():
            values[positions[name]] = field_prep(model, name, native_uuid)(value, connection)
        params += values
    execute(connection, _insert_text(model, len(rows)), params)


_NOW_PLACEHOLDER = object()


@functools.cache
def _inserted_fields(model: type[models.Model]) -> tuple[models.Field, ...]:
    if not isinstance(model._meta.pk, models.AutoField | models.BigAutoField):
        raise TypeError(f"insert_rows needs an automatic primary key; {model.__name__} has none")
    # A column with a database default (``Event.xid``) is the database's to fill.
    return tuple(
        field
        for field in model._meta.concrete_fields
        if field is not model._meta.pk and field.db_default is models.NOT_PROVIDED
    )


@functools.cache
def _insert_positions(model: type[models.Model]) -> dict[str, int]:
    return {field.name: index for index, field in enumerate(_inserted_fields(model))}


@functools.cache
def _default_row(model: type[models.Model], vendor: str, native_uuid: bool) -> tuple[Any, ...]:
    """Each inserted field's default, as stored; ``auto_now`` fields marked for the time.

    Adapted once per model and backend: the defaults of these models are constants or
    empty JSON containers, whose stored form never changes.
    """
    connection = engine_connection()
    assert connection.vendor == vendor
    values: list[Any] = []
    for field in _inserted_fields(model):
        if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
            values.append(_NOW_PLACEHOLDER)
        else:
            prep = field_prep(model, field.name, native_uuid)
            values.append(prep(field.get_default(), connection))
    return tuple(values)


@functools.lru_cache(maxsize=256)
def _insert_text(model: type[models.Model], rows: int) -> str:
    fields = _inserted_fields(model)
    columns = ", ".join(column(model, field.name) for field in fields)
    values = ", ".join([f"({', '.join(['%s'] * len(fields))})"] * rows)
    return f"INSERT INTO {table(model)} ({columns}) VALUES {values}"


class EventRow(NamedTuple):
    """One event to insert: of a run (and maybe a step), of a flow, or both."""

    run: UUID | None
    step: int | None
    type: str
    payload: dict[str, Any]
    flow: UUID | None = None


def insert_events(events: Sequence[EventRow]) -> None:
    """Insert event rows with one multi-row ``INSERT``.

    The ``flow`` column is named only when a row has a flow, so the statement of a
    transition outside any flow (nearly all) is the one it always was.
    """
    connection = engine_connection()
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with_flow = any([event.flow is not None for event in events])
    params = event_params(events, now, connection, with_flow=with_flow)
    execute(connection, _insert_events_text(len(events), with_flow), params)


def event_params(
    events: Sequence[EventRow], now: Any, connection: BaseDatabaseWrapper, *, with_flow: bool
) -> list[Any]:
    """The stored values of ``events``, row after row: run, step, type, payload, the time
    ``now`` (adapted), not published, and with ``with_flow`` the flow."""
    run_key, flow_key, payload = _event_adapters(connection.features.has_native_uuid_field)
    params: list[Any] = []
    for event in events:
        params += [
            run_key(event.run, connection) if event.run is not None else None,
            event.step,
            event.type,
            payload(event.payload, connection),
            now,
            False,
        ]
        if with_flow:
            params.append(flow_key(event.flow, connection) if event.flow is not None else None)
    return params


@functools.cache
def _event_adapters(native_uuid: bool) -> tuple[Adapter, Adapter, Adapter]:
    """How an event's run, flow and payload are stored: looked up once, every transition
    inserts events."""
    return (
        field_prep(Event, "run", native_uuid),
        field_prep(Event, "flow", native_uuid),
        field_prep(Event, "payload", native_uuid),
    )


@functools.lru_cache(maxsize=128)
def _insert_events_text(rows: int, with_flow: bool) -> str:
    names: tuple[str, ...] = ("run", "step", "type", "payload", "created_at", "published")
    names += ("flow",) if with_flow else ()
    columns = ", ".join(column(Event, name) for name in names)
    values = ", ".join(["(" + ", ".join(["%s"] * len(names)) + ")"] * rows)
    return f"INSERT INTO {table(Event)} ({columns}) VALUES {values}"
