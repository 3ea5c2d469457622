"""What the operator commands share between reading their options and calling a verb.

The user an operator acts as, JSON option values, and a verb's refusal turned into a
``CommandError``: kept here so that every command words these the same way.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management.base import CommandError
from django.utils import timezone

from workflows.definitions.deadline import parse_deadline
from workflows.errors import InvalidInput, RunNotFound, WorkflowError
from workflows.models import Run
from workflows.queries import get_run
from workflows.services.access import VERBS
from workflows.tags import parse_tag

if TYPE_CHECKING:
    from workflows.permissions import AnyUser

_AGE = re.compile(r"(?P<number>[0-9]+)(?P<unit>[smhd])")
_AGE_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
_EARLIEST = datetime.min.replace(tzinfo=UTC)
T = TypeVar("T")


def json_value(text: str) -> Any:
    """argparse type of a JSON option: any JSON value, refused at parse time if malformed.

    ``NaN`` and ``Infinity`` are refused too: Python's parser accepts them, but they are
    not JSON and PostgreSQL would reject them when the value is stored.
    """

    def refuse_constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON value")

    try:
        return json.loads(text, parse_constant=refuse_constant)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from exc


def parse_age(text: str) -> timedelta:
    """The age an option such as ``--older-than`` gives: a whole number and one unit,
    ``s``, ``m``, ``h`` or ``d`` (``30m``, ``3h``, ``2d``), or a ``CommandError``.

    Strict on purpose: ``2`` (which unit?), ``1.5h``, ``2 d`` and ``0d`` are refused
    rather than guessed, as is an age reaching back before year 1.
    """
    match = _AGE.fullmatch(text)
    if match:
        try:
            age = timedelta(**{_AGE_UNITS[match["unit"]]: int(match["number"])})
            if timedelta(0) < age < timezone.now() - _EARLIEST:
                return age
        except OverflowError:
            pass  # more days than a timedelta holds: refused below like any bad age
    raise CommandError(
        f"an age is a positive whole number followed by s, m, h or d (30m, 3h, 2d), got {text!r}"
    )


def positive_int(value: str) -> int:
    """argparse type of ``--limit``: zero rows is never what an operator asks for."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value!r}")
    return number


def positive_days(value: str) -> float:
    """argparse type of ``--older-than`` in days: a positive number of days.

    Refused up front too: a number so large that the cut-off date would fall before
    year 1, where the purge could not compute it.
    """
    try:
        days = float(value)
        valid = days > 0 and timedelta(days=days) < timezone.now() - _EARLIEST
    except (ValueError, OverflowError):
        valid = False
    if not valid:
        raise argparse.ArgumentTypeError(
            f"DAYS must be a positive number reaching no further back than year 1, got {value!r}"
        )
    return days


def past_instant(value: str) -> datetime:
    """argparse type of ``--before``: an ISO 8601 date and time with its UTC offset
    (``2026-03-01T00:00:00Z``, ``2026-03-01T02:00:00+01:00``), not in the future."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not an ISO 8601 date and time such as 2026-03-01T00:00:00Z: {value!r}"
        ) from None
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{value!r} has no UTC offset; add one, e.g. Z or +01:00")
    if moment > timezone.now():
        raise argparse.ArgumentTypeError(f"{value!r} is in the future")
    return moment


def positive_number(value: str) -> float:
    """argparse type of a positive amount (milliseconds, seconds): a finite number over 0."""
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if not 0 < number < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {value!r}")
    return number


def priority_number(text: str) -> int:
    """argparse type of a PRIORITY: a whole number. Its range is the service's to check,
    so that every surface refuses 1001 with the same message."""
    try:
        return int(text)
    except ValueError:
        raise CommandError(f"PRIORITY must be a whole number, got {text!r}") from None


# What a --deadline option says it takes, in every command that has one.
DEADLINE_HELP = (
    "when the run must have ended, or it fails with deadline_exceeded and compensates: "
    "seconds from now (3600), an ISO 8601 duration (PT30M, P2D) or an ISO 8601 date and "
    "time with its offset (2026-12-24T18:00:00+01:00)"
)


def deadline_value(text: str) -> timedelta | datetime:
    """argparse type of a DEADLINE (:func:`~workflows.definitions.deadline.parse_deadline`).
    Whether it is a good one (positive, aware, in the future) is the service's to say."""
    try:
        return parse_deadline(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def tag_value(text: str) -> tuple[str, str]:
    """argparse type of a ``--tag KEY=VALUE`` (:func:`workflows.tags.parse_tag`): the
    pair, or an error naming the malformed tag."""
    try:
        return parse_tag(text, separator="=")
    except InvalidInput as exc:
        raise argparse.ArgumentTypeError(exc.message) from None


def tags_given(pairs: Sequence[tuple[str, str]] | None) -> dict[str, str] | None:
    """The ``--tag`` options given, as one mapping (``None`` for none); a key given
    twice with two values is a :class:`CommandError` naming it."""
    if not pairs:
        return None
    tags: dict[str, str] = {}
    for key, value in pairs:
        if tags.get(key, value) != value:
            raise CommandError(f"--tag {key!r} is given twice ({tags[key]!r} and {value!r})")
        tags[key] = value
    return tags


def user_named(username: str) -> AnyUser:
    """Return the user called ``username``, or refuse.

    Looked up by the user model's ``USERNAME_FIELD``, so a custom user model works too.
    """
    user_model = get_user_model()
    try:
        return user_model._default_manager.get_by_natural_key(username)
    except user_model.DoesNotExist:
        raise CommandError(f"no user named {username!r}") from None


def named_acting_user(username: str, verb: str) -> AnyUser:
    """The user ``--user`` names for ``verb``, held to what the verb table asks of a
    named user (:mod:`workflows.services.access`): ``PermissionDenied`` when they fall
    short. The gate verbs call it directly: their ``--user`` is required."""
    user = user_named(username)
    VERBS[verb].check_named(user)
    return user


def acting_user(username: str | None, verb: str) -> AnyUser | None:
    """:func:`named_acting_user`, or ``None`` without ``--user``: the command line is
    trusted code."""
    return None if username is None else named_acting_user(username, verb)


@contextmanager
def refusals_as_command_errors() -> Iterator[None]:
    """Turn a refused verb (a ``WorkflowError`` or ``PermissionDenied``) into a
    ``CommandError`` carrying its message, so the command exits non-zero naming the problem.

    Both are refusals decided before anything is written; any other exception is a bug
    and keeps its traceback.
    """
    try:
        yield
    except WorkflowError as exc:
        raise CommandError(exc.message) from exc
    except PermissionDenied as exc:
        raise CommandError(str(exc) or "permission denied") from exc


def run_from_options(options: dict[str, Any]) -> Run:
    """The run that ``RUN`` or ``--business-key`` names, or a clear refusal."""
    reference, business_key = options.get("run_id"), options.get("business_key")
    named_one_way("run", ("RUN", reference), ("--business-key", business_key))
    if reference is None:
        matches = Run.objects.filter(business_key=business_key)
        described = f"business key {business_key!r}"
    else:
        run = by_whole_id(reference, get_run, RunNotFound)
        if run is not None:
            return run
        matches = Run.objects.filter(id__startswith=id_prefix(reference, "run"))
        described = f"id prefix {reference!r}"
    found = list(matches.order_by("-created_at").values_list("id", flat=True)[: SHOWN + 1])
    return Run.objects.get(pk=only_one(found, "run", described))


def named_one_way(noun: str, by_id: tuple[str, str | None], by_key: tuple[str, str | None]) -> None:
    """Refuse unless exactly one way of naming a ``noun`` was used: by its id (or a prefix
    of it), or by the option that names it by a key of its own."""
    (id_name, reference), (key_option, key) = by_id, by_key
    if (reference is None) == (key is None):
        raise CommandError(
            f"name the {noun} by {id_name} (its id or a prefix) or by {key_option}: "
            "exactly one of them"
        )


def by_whole_id(
    reference: str, get: Callable[[str], T], not_found: type[WorkflowError]
) -> T | None:
    """What ``get`` finds by the id ``reference``; ``None`` when nothing has that id but
    it may be the prefix of one. A whole id that names nothing raises ``not_found``."""
    text = reference.strip().lower()
    try:
        return get(text)
    except not_found:
        if len(text.replace("-", "")) == _UUID_DIGITS:
            raise  # a whole id: "no run has id ..."
        return None


def id_prefix(reference: str, noun: str) -> str:
    """``reference`` as the start of a ``noun``'s id, or a refusal when it cannot be one."""
    prefix = reference.strip().lower()
    if len(prefix.replace("-", "")) < _MIN_PREFIX or not _HEX.fullmatch(prefix):
        raise CommandError(
            f"{reference!r} is neither a {noun} id nor a prefix of one (at least "
            f"{_MIN_PREFIX} hexadecimal characters)"
        )
    return prefix


def only_one(found: Sequence[T], noun: str, described: str, label: Callable[[T], str] = str) -> T:
    """The one ``noun`` of ``found`` (the first ``SHOWN + 1`` matches, newest first), or
    a refusal naming what matched: none, or several (listed by ``label``)."""
    if not found:
        raise CommandError(f"no {noun} has {described}")
    if len(found) > 1:
        listed = ", ".join(label(each) for each in found[:SHOWN])
        more = ", ..." if len(found) > SHOWN else ""
        raise CommandError(
            f"more than one {noun} has {described} ({listed}{more}); name one by its id"
        )
    return found[0]


_MIN_PREFIX = 4
_UUID_DIGITS = 32
# How many of the things a reference matches a refusal lists.
SHOWN = 5
_HEX = re.compile(r"[0-9a-f-]+")
