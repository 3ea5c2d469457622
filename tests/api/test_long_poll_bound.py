"""Long polls against a real server thread over real sockets: a poll whose client hung
up stops waiting (its thread is free again), and one user holds at most
``LONG_POLLS_PER_USER`` of them at once (429 ``too_many_waits`` beyond).

The server is pytest-django's ``live_server`` (Django's threaded WSGI server, as
``runserver`` serves); the test reads :func:`workflows.api.long_poll.waits_in_progress`
of the same process to see which polls still hold a thread.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import Permission, User
from rest_framework.authtoken.models import Token

import workflows
from workflows.api.long_poll import waits_in_progress

pytestmark = pytest.mark.django_db(transaction=True)

POLL = "/api/events/?consumer=quiet&wait=30"


def _token(name: str) -> str:
    user = User.objects.create_user(name)
    user.user_permissions.add(Permission.objects.get(codename="view_run"))
    return Token.objects.create(user=user).key


def _until(condition: Callable[[], bool], seconds: float = 10.0) -> float:
    """Seconds until ``condition()`` held; fails after ``seconds``."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < seconds, "timed out"
        time.sleep(0.02)
    return time.monotonic() - started


@pytest.fixture
def server(live_server) -> Iterator[tuple[str, int]]:
    workflows.create_consumer("quiet")  # no event: its polls wait
    parts = urlsplit(live_server.url)
    yield parts.hostname, parts.port
    _until(lambda: waits_in_progress() == 0, 40)


def _send(address: tuple[str, int], token: str, path: str = POLL) -> socket.socket:
    sock = socket.create_connection(address, timeout=40)
    sock.sendall(
        f"GET {path} HTTP/1.1\r\nHost: testserver\r\nAuthorization: Token {token}\r\n"
        "Connection: close\r\n\r\n".encode()
    )
    return sock


def _answer(sock: socket.socket) -> tuple[int, dict[str, str], dict]:
    raw = b""
    while chunk := sock.recv(65536):
        raw += chunk
    sock.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, json.loads(body)


def test_a_poll_stops_when_its_client_hangs_up(server):
    token = _token("hangs-up")
    clients = [_send(server, token) for _ in range(5)]
    _until(lambda: waits_in_progress() == 5)
    for sock in clients:
        sock.close()
    # Each poll looks at its socket before every wait (0.2 s apart on SQLite, 1 s on
    # PostgreSQL), so all five end well before their 30 s.
    assert _until(lambda: waits_in_progress() == 0) < 5


def test_a_user_holds_at_most_the_bound_of_waits(server, settings):
    settings.WORKFLOWS = {**getattr(settings, "WORKFLOWS", {}), "LONG_POLLS_PER_USER": 2}
    token, other = _token("greedy"), _token("other")
    held = [_send(server, token) for _ in range(2)]
    _until(lambda: waits_in_progress() == 2)
    started = time.monotonic()
    status, headers, body = _answer(_send(server, token))
    assert time.monotonic() - started < 5  # refused at once, without waiting
    assert status == 429
    assert body["error"]["code"] == "too_many_waits"
    assert body["error"]["retryable"] is True and body["error"]["details"] == {"limit": 2}
    assert headers["Retry-After"] == "1"
    # A request that does not wait is no long poll: it is answered as usual.
    assert _answer(_send(server, token, "/api/events/?consumer=quiet"))[0] == 200
    # Another user is not held to this one's polls.
    status, _, body = _answer(_send(server, other, "/api/events/?consumer=quiet&wait=0.3"))
    assert status == 200 and body["events"] == []
    for sock in held:
        sock.close()
    _until(lambda: waits_in_progress() == 0)
    # The slots are free again.
    status, _, _ = _answer(_send(server, token, "/api/events/?consumer=quiet&wait=0.3"))
    assert status == 200


def test_a_poll_whose_client_stays_is_answered_on_the_commit(server):
    token = _token("patient")
    sock = _send(server, token)
    _until(lambda: waits_in_progress() == 1)
    time.sleep(0.5)  # several looks at a live socket do not end the poll
    assert waits_in_progress() == 1
    run = workflows.models.Run.objects.create(
        workflow_name="long_poll_bound", workflow_version=1, snapshot={}
    )
    workflows.models.Event.objects.create(run=run, type="arrived")
    status, _, body = _answer(sock)
    assert status == 200 and [event["type"] for event in body["events"]] == ["arrived"]


def test_a_peek_tells_a_closed_client_from_a_quiet_or_talkative_one():
    from workflows.api.long_poll import hung_up

    server_side, client_side = socket.socketpair()
    try:
        assert not hung_up(server_side)  # quiet: nothing to read
        client_side.sendall(b"GET / HTTP/1.1\r\n")  # a pipelined request: still there
        assert not hung_up(server_side)
        assert server_side.recv(100).startswith(b"GET")  # the peek consumed nothing
        client_side.close()
        assert hung_up(server_side)
    finally:
        server_side.close()
    assert hung_up(server_side)  # a closed descriptor counts as gone, without raising
