"""Long polls whose clients hang up: how many server threads they hold, and for how long.

In one process: Django's threaded WSGI server (what ``runserver`` serves) on a fresh
temporary SQLite file set up like the demo's, or on the PostgreSQL database
``DATABASE_URL`` names (as :mod:`bench.waits` does). ``--polls`` clients (40) each send
``GET /api/events/?consumer=quiet&wait=--wait`` (30 s; the consumer has no event, so
every poll waits) over a raw socket and hang up after ``--hang-up`` seconds (2). The
server's request threads still alive are counted every 0.5 s until none is left.

Measured twice:

- *before*: the poll does not look at its client (the hang-up check switched off, as
  before the fix) and no per-user bound (``LONG_POLLS_PER_USER`` = the number of polls);
  each poll holds its thread for its whole wait;
- *after*: as shipped. Two runs: 40 users with one poll each (every poll admitted, each
  stopping at its next look at its socket after the hang-up), and one user sending all
  40 (``LONG_POLLS_PER_USER`` = 8: 8 admitted, the others refused at once with 429).

Prints figures and asserts no timing.
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.fresh_sqlite import print_table  # noqa: E402
from bench.waits import database  # noqa: E402


def request_threads() -> int:
    """The server's request threads alive now (socketserver names them ``Thread-N``
    with the target ``process_request_thread``)."""
    return sum(1 for thread in threading.enumerate() if "process_request_thread" in thread.name)


@contextmanager
def server() -> Iterator[tuple[str, int]]:
    from django.core.handlers.wsgi import WSGIHandler
    from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadedWSGIServer(("127.0.0.1", 0), Quiet, allow_reuse_address=True)
    httpd.set_app(WSGIHandler())
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd.server_address[:2]
    finally:
        httpd.shutdown()
        httpd.server_close()


def tokens(count: int) -> list[str]:
    from django.contrib.auth.models import Permission, User
    from rest_framework.authtoken.models import Token

    permission = Permission.objects.get(codename="view_run")
    keys = []
    for _ in range(count):
        user = User.objects.create_user(f"poller-{User.objects.count()}")
        user.user_permissions.add(permission)
        keys.append(Token.objects.create(user=user).key)
    return keys


def measure(
    address: tuple[str, int], keys: list[str], wait: float, hang_up: float
) -> dict[str, str]:
    """Send one poll per key, hang up after ``hang_up`` s; the threads held over time."""
    statuses: Counter[str] = Counter()
    clients = []
    for key in keys:
        sock = socket.create_connection(address)
        sock.sendall(
            f"GET /api/events/?consumer=quiet&wait={wait:g} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Token {key}\r\nConnection: close\r\n\r\n".encode()
        )
        clients.append(sock)
    started = time.monotonic()
    time.sleep(1.0)
    for sock in clients:  # what answered already (a 429 comes at once)
        sock.setblocking(False)
        try:
            head = sock.recv(64)
            statuses[head.split()[1].decode() if head else "closed"] += 1
        except BlockingIOError:
            statuses["waiting"] += 1
    held_before_hang_up = request_threads()
    time.sleep(max(0.0, hang_up - (time.monotonic() - started)))
    for sock in clients:
        sock.close()
    hung_up_at = time.monotonic()
    samples = {}
    while request_threads():
        elapsed = time.monotonic() - hung_up_at
        for mark in (1, 5, 10, 20):
            if elapsed >= mark and mark not in samples:
                samples[mark] = request_threads()
        time.sleep(0.05)
        if elapsed > wait + 10:
            break
    released = time.monotonic() - hung_up_at
    return {
        "answered within 1 s": ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())),
        "threads held before the hang-up": str(held_before_hang_up),
        **{f"threads held {mark} s after": str(samples.get(mark, 0)) for mark in (1, 5, 10, 20)},
        "seconds until every thread is free": f"{released:.1f}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--polls", type=int, default=40)
    parser.add_argument("--wait", type=float, default=30.0)
    parser.add_argument("--hang-up", type=float, default=2.0)
    args = parser.parse_args()
    with database() as described:
        from django.conf import settings
        from django.test.utils import override_settings

        import workflows
        from workflows.api import long_poll
        from workflows.models import EventConsumer

        EventConsumer.objects.filter(name="quiet").delete()
        workflows.create_consumer("quiet")
        many = tokens(args.polls)
        one = tokens(1) * args.polls
        results = {}
        with server() as address:
            found = long_poll.client_gone
            long_poll.client_gone = lambda request: None  # type: ignore[assignment]
            try:
                with override_settings(
                    WORKFLOWS={
                        **getattr(settings, "WORKFLOWS", {}),
                        "LONG_POLLS_PER_USER": args.polls,
                    }
                ):
                    results["before"] = measure(address, many, args.wait, args.hang_up)
            finally:
                long_poll.client_gone = found  # type: ignore[assignment]
            results[f"after, {args.polls} users"] = measure(address, many, args.wait, args.hang_up)
            results["after, 1 user"] = measure(address, one, args.wait, args.hang_up)
        print(
            f"\n{described}: {args.polls} polls (wait={args.wait:g}) whose clients hang up "
            f"after {args.hang_up:g} s"
        )
        for label, figures in results.items():
            print(f"\n{label}")
            print_table(list(figures.items()))


if __name__ == "__main__":
    main()
