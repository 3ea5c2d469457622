"""The demo's label printer: a worker outside the process for the ``print_label`` step of
``warehouse_dispatch`` (``Task(external=True, queue="labels")``).

It speaks HTTP only, with the Python standard library, as a service in any language
would: it long-polls ``POST /api/work/claim/`` for jobs of queue ``labels``, and for
each job heartbeats its lease with progress, writes a log line, and completes the
attempt with the label it "printed". It never imports the ``workflows`` package.

It signs in as the demo's service account ``label-printer``, which ``demo_setup``
creates holding ``workflows.do_external_work`` and nothing else, with the token the
API's token authentication takes (``--token``); ``--user``/``--password`` send HTTP
basic credentials instead, for an API that accepts them. ``make run`` starts it; alone::

    python flowsite/label_printer.py --url http://127.0.0.1:8000 --token <token>

A lease the server refuses (409: revoked, expired, the run cancelled) drops the job and
the printer claims again. An unreachable or failing server is retried after a growing
pause: the printer starts along with the site it talks to and ends only when stopped
(SIGINT or SIGTERM, at once, even in the middle of a long poll), or with ``--once``
after the first job it finishes or gives up.
"""

from __future__ import annotations

import argparse
import base64
import json
import signal
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from types import FrameType
from typing import Any

QUEUE = "labels"
# How long one claim waits for work on the server (the API allows up to 60 s).
CLAIM_WAIT = 20
# The pause after an error grows from the first to the last of these (seconds).
PAUSES = (1, 2, 5, 10)
# A request's own bound: a long poll plus the server's time to answer.
REQUEST_TIMEOUT = CLAIM_WAIT + 15


class LeaseRefused(Exception):
    """The server answered 409: the lease is no longer this printer's."""


class Stopped(BaseException):
    """SIGTERM (or SIGINT) asked the printer to stop."""


def label_for(order: dict[str, Any], printer: str) -> dict[str, Any]:
    """What printing the shipping label of ``order`` (the input of the run whose
    ``print_label`` was claimed) yields."""
    return {
        "label": f"LBL-{order.get('order_id', '?')}",
        "parcels": len(order.get("parcels", [])),
        "by": printer,
    }


class Client:
    """``POST`` JSON to ``/api/work/<verb>/`` with the printer's credentials."""

    def __init__(self, url: str, authorization: str) -> None:
        self.base = url.rstrip("/") + "/api/work/"
        self.authorization = authorization
        # The site is local to the printer: a developer's http_proxy must not see it.
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def post(self, verb: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            self.base + verb + "/",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Authorization": self.authorization},
            method="POST",
        )
        try:
            with self.opener.open(request, timeout=REQUEST_TIMEOUT) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            if error.code == 409:
                raise LeaseRefused(_message(error)) from None
            raise


def _message(error: urllib.error.HTTPError) -> str:
    """The error envelope's code and message, or the HTTP status when there is none."""
    try:
        found = json.loads(error.read())["error"]
        return f"{found['code']}: {found['message']}"
    except (ValueError, KeyError, TypeError):
        return f"HTTP {error.code}"


def print_label(client: Client, job: dict[str, Any], printer: str) -> None:
    """Do one job: heartbeat with progress, log, complete with the label."""
    lease, order = job["lease"], job["input"].get("order_id", "?")
    client.post(
        "heartbeat", {"lease": lease, "progress": [0, 1], "message": f"printing order {order}"}
    )
    label = label_for(job["input"], printer)
    client.post(
        "log",
        {"lease": lease, "text": f"label {label['label']} printed for {label['parcels']} parcels"},
    )
    client.post("heartbeat", {"lease": lease, "progress": [1, 1], "message": "printed"})
    client.post("complete", {"lease": lease, "output": label})
    say(f"printed {label['label']} (run {job['run']}, attempt {job['attempt']})")


def serve(client: Client, printer: str, *, once: bool) -> None:
    """Claim and print until stopped (or, ``once``, until one job ended either way)."""
    failures = 0
    while True:
        try:
            claimed = client.post(
                "claim", {"queues": [QUEUE], "worker": printer, "limit": 1, "wait": CLAIM_WAIT}
            )
            for job in claimed["jobs"]:
                try:
                    print_label(client, job, printer)
                except LeaseRefused as refused:
                    say(f"dropped the job of run {job['run']}: {refused}")
                if once:
                    return
            failures = 0
        except (urllib.error.URLError, OSError, ValueError, KeyError) as error:
            pause = PAUSES[min(failures, len(PAUSES) - 1)]
            failures += 1
            say(f"{_described(error)}; trying again in {pause} s")
            time.sleep(pause)


def _described(error: Exception) -> str:
    if isinstance(error, urllib.error.HTTPError):
        return f"the server answered {_message(error)}"
    if isinstance(error, urllib.error.URLError):
        return f"the server is unreachable ({error.reason})"
    return f"{type(error).__name__}: {error}"


def say(line: str) -> None:
    print(f"label_printer: {line}", file=sys.stderr, flush=True)


def authorization(options: argparse.Namespace) -> str:
    """The ``Authorization`` header: the API token, else basic credentials."""
    if options.token:
        return f"Token {options.token}"
    pair = f"{options.user}:{options.password}".encode()
    return "Basic " + base64.b64encode(pair).decode()


def _stop(signum: int, frame: FrameType | None) -> None:
    raise Stopped


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The demo's external label printer.")
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the site's address")
    parser.add_argument("--token", help="the API token of the label-printer account")
    parser.add_argument("--user", default="label-printer", help="basic auth user")
    parser.add_argument("--password", default="label-printer", help="basic auth password")
    parser.add_argument("--worker", default="label-printer-1", help="this printer's name")
    parser.add_argument("--once", action="store_true", help="stop after one job")
    options = parser.parse_args(argv)
    # A signal ends a long poll at once: the handler raises in the blocked read.
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        say(f"claiming from queue {QUEUE!r} of {options.url} as {options.worker}")
        serve(Client(options.url, authorization(options)), options.worker, once=options.once)
    except Stopped:
        say("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
