"""The API's long polls: the ``wait`` query parameter, and views that hold no transaction.

``GET /api/runs/{id}/?wait=S`` (and the event and frame cursors) answer as soon as what
the client waits for has committed, or after ``S`` seconds with the current state. The
waiting itself is :func:`workflows.queries.long_poll.long_poll`; this module is the HTTP
side every such endpoint shares:

- :func:`wait_seconds` reads ``wait``: a number of seconds from 0 to :data:`MAX_WAIT`;
  anything else is a 400 ``validation_error`` naming ``wait``. Absent, 0: no waiting.
- :func:`waiting` is the block a view waits in: it reads ``wait``, holds one of the
  user's ``WORKFLOWS["LONG_POLLS_PER_USER"]`` slots while it waits (one more is a 429
  ``too_many_waits``, :class:`~workflows.errors.TooManyWaits`, refused before any
  wait), and stops the wait when the client has hung up (:func:`client_gone`);
  :func:`holding_wait` is the same block for a wait given in the body (a claim of
  external work, :mod:`workflows.api.work`).
- :func:`timed_out` says whether the answer came because the wait ran out, the
  ``timed_out`` every long poll's answer carries (:func:`timed_out_field` in its
  serializer): a client tells "nothing yet, ask again" from "here it is" without
  comparing the answer with the last one.
- :func:`checked_query` reads the rest of such an endpoint's query string through a
  serializer: a 400 ``validation_error`` naming the bad parameter.
- :func:`without_request_transaction` marks a view so that ``ATOMIC_REQUESTS`` does not
  wrap it in a transaction: a long poll must not hold one (its snapshot on SQLite would
  never see the commit it waits for; on PostgreSQL it would pin a connection
  ``idle in transaction`` for up to a minute). Every write the viewset's other actions
  make runs in the engine's own transactions, so they lose nothing by it.
"""

from __future__ import annotations

import math
import select
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from django.db import connections
from django.http import HttpRequest
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.viewsets import ViewSetMixin

from workflows.api.errors import APIError
from workflows.conf import workflow_settings
from workflows.errors import TooManyWaits
from workflows.queries.long_poll import stopping_when

# The longest wait a request may ask for, in seconds: past it proxies and clients time out.
MAX_WAIT = 60.0

WAIT_PARAMETER = OpenApiParameter(
    "wait",
    OpenApiTypes.NUMBER,
    OpenApiParameter.QUERY,
    description=(
        f"long poll: answer as soon as there is something new, or after this many seconds "
        f"(0 to {MAX_WAIT:g}; default 0, answer at once)"
    ),
)

V = TypeVar("V", bound=Callable[..., Any])


def timed_out(seconds: float, arrived: bool) -> bool:
    """Whether a long poll answered because its ``wait`` ran out: it waited (``seconds``
    above 0) and what it waits for had not ``arrived``. False without a wait."""
    return seconds > 0 and not arrived


def timed_out_field() -> serializers.BooleanField:
    """The ``timed_out`` field of a long poll's answer (:func:`timed_out`)."""
    return serializers.BooleanField(
        help_text="true: the wait ran out before what it waits for came, and this is the "
        "current state (ask again); false: it came, or no wait was asked"
    )


def wait_seconds(request: Request) -> float:
    """The request's ``wait`` in seconds (0 when absent); a 400 naming ``wait`` when it
    is not a number from 0 to :data:`MAX_WAIT`."""
    raw = request.query_params.get("wait")
    if raw is None:
        return 0.0
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not 0 <= seconds <= MAX_WAIT:  # also refuses nan and inf
        raise APIError(
            400,
            "validation_error",
            "the request is not valid; see details",
            {"wait": [f"a number of seconds from 0 to {MAX_WAIT:g}"]},
        )
    return seconds


def checked_query(
    request: Request, serializer_class: type[serializers.Serializer]
) -> dict[str, Any]:
    """The query parameters ``serializer_class`` declares, validated (others ignored);
    a 400 ``validation_error`` naming the first bad one."""
    fields = serializer_class().fields
    query = serializer_class(
        data={name: value for name, value in request.query_params.items() if name in fields}
    )
    query.is_valid(raise_exception=True)
    return dict(query.validated_data)


def without_request_transaction(view: V) -> V:
    """``view`` exempt from ``ATOMIC_REQUESTS`` on every database (see the module)."""
    view._non_atomic_requests = {alias for alias in connections}  # type: ignore[attr-defined]
    return view


class LongPollViews(ViewSetMixin):
    """A viewset mixin (listed before the viewset's base): the actions named in
    ``long_poll_actions`` hold no request transaction (:func:`without_request_transaction`).

    DRF builds one Django view per route from ``as_view(actions)``; ``ATOMIC_REQUESTS``
    looks at that view, so the mark goes there, on the routes serving those actions.
    """

    long_poll_actions: frozenset[str] = frozenset()

    @classmethod
    def as_view(cls, actions: dict[str, Any] | None = None, **initkwargs: Any) -> Any:
        view = super().as_view(actions, **initkwargs)
        if actions and cls.long_poll_actions & set(actions.values()):
            without_request_transaction(view)
        return view


# The long polls each user holds now, in this process: user key -> count.
_held: dict[str, int] = {}
_held_lock = threading.Lock()


def waits_in_progress() -> int:
    """How many long polls this process holds now (every user's)."""
    with _held_lock:
        return sum(_held.values())


def _user_key(request: Request) -> str:
    user = request.user
    if user is not None and user.is_authenticated:
        return f"user:{user.pk}"
    return f"address:{request.META.get('REMOTE_ADDR', '')}"


@contextmanager
def _slot(request: Request) -> Iterator[None]:
    key = _user_key(request)
    limit = workflow_settings.LONG_POLLS_PER_USER
    with _held_lock:
        if _held.get(key, 0) >= limit:
            raise TooManyWaits(
                f"this user already holds {limit} long polls (LONG_POLLS_PER_USER); "
                "retry when one has answered",
                limit=limit,
            )
        _held[key] = _held.get(key, 0) + 1
    try:
        yield
    finally:
        with _held_lock:
            _held[key] -= 1
            if not _held[key]:
                del _held[key]


@contextmanager
def waiting(request: Request) -> Iterator[float]:
    """The block a long poll waits in; yields its ``wait`` (:func:`wait_seconds`).

    With a wait above 0, it holds one of the user's slots (:class:`TooManyWaits` when
    they hold ``LONG_POLLS_PER_USER`` already) and makes every
    :func:`~workflows.queries.long_poll.long_poll` inside stop as soon as the client has
    hung up (:func:`client_gone`).
    """
    seconds = wait_seconds(request)
    with holding_wait(request, seconds):
        yield seconds


@contextmanager
def holding_wait(request: Request, seconds: float) -> Iterator[None]:
    """The block a long poll whose wait came another way (a field of its body) waits
    in: as :func:`waiting`, for a wait of ``seconds`` already checked."""
    if not seconds:
        yield
        return
    with _slot(request), stopping_when(client_gone(request)):
        yield


# Attributes leading from a WSGI server's input stream to the connection's socket:
# Django's runserver (its LimitedStream keeps the bound ``_read`` of a BufferedReader,
# whose ``raw`` SocketIO keeps ``_sock``), wsgiref, and servers that keep it as ``sock``.
_TOWARDS_SOCKET = ("stream", "_read", "raw", "_sock", "sock", "rfile", "_rfile")


def request_socket(request: Request | HttpRequest) -> socket.socket | None:
    """The client connection's socket, where the server lets it be found: gunicorn puts
    it in ``environ["gunicorn.socket"]``; under runserver (and wsgiref) it is behind
    ``wsgi.input``. ``None`` under ASGI, the test client, or a server that hides it."""
    meta = request.META
    found = meta.get("gunicorn.socket")
    if isinstance(found, socket.socket):
        return found
    current: Any = meta.get("wsgi.input")
    for _ in range(6):
        if isinstance(current, socket.socket):
            return current
        current = next(
            (getattr(current, name) for name in _TOWARDS_SOCKET if hasattr(current, name)), None
        )
        current = getattr(current, "__self__", current)  # a bound method: its object
        if current is None:
            return None
    return current if isinstance(current, socket.socket) else None


def hung_up(sock: socket.socket) -> bool:
    """Whether the peer of ``sock`` has closed the connection (or it broke).

    A look that never blocks and reads nothing: ``select`` with no timeout says whether
    the socket is readable; a readable socket whose ``MSG_PEEK`` of one byte returns
    nothing is at end of file, i.e. the client closed its side. Bytes waiting (a
    pipelined request) mean the client is there.
    """
    try:
        readable, _, failed = select.select([sock], [], [sock], 0)
        if failed:
            return True
        if not readable:
            return False
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):  # reset, closed, or no longer a descriptor
        return True


def client_gone(request: Request | HttpRequest) -> Callable[[], bool] | None:
    """A check that says whether ``request``'s client has hung up, or ``None`` when its
    socket cannot be found (see :func:`request_socket`)."""
    sock = request_socket(request)
    if sock is None:
        return None
    return lambda: hung_up(sock)
