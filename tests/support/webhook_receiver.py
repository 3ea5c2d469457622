"""A real HTTP receiver for webhook tests: 127.0.0.1, a free port, a hard deadline.

It answers each POST with the next status of its script (then the last one again),
records what arrived, and verifies every signature with its own implementation of the
Standard Webhooks scheme (nothing imported from ``workflows``), so a test checks what a
receiver library would check. It shuts itself down at its deadline, so a test never
hangs on it, and :meth:`Receiver.wait_for` gives up at that deadline too.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEADLINE_SECONDS = 60


def verify(secret: str, headers: dict[str, str], body: bytes) -> bool:
    """Standard Webhooks verification, as a receiver does it (constant-time compare)."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return any(
        version == "v1" and hmac.compare_digest(signature, expected)
        for version, _, signature in (
            candidate.partition(",") for candidate in headers["webhook-signature"].split()
        )
    )


@dataclass
class Received:
    """One request as it arrived."""

    headers: dict[str, str]
    body: bytes
    verified: bool
    answered: int
    at: float

    @property
    def json(self) -> dict[str, Any]:
        return json.loads(self.body)

    @property
    def message_id(self) -> str:
        return self.headers["webhook-id"]


class Receiver:
    """``with Receiver(secret, [500, 500, 200]) as receiver: ... receiver.url``."""

    def __init__(
        self, secret: str = "", script: list[int] | None = None, *, delay: float = 0.0
    ) -> None:
        self.secret = secret
        self.script = list(script or [200])
        self.delay = delay
        self.requests: list[Received] = []
        self._lock = threading.Lock()
        self._deadline = time.monotonic() + DEADLINE_SECONDS
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                headers = {name.lower(): value for name, value in self.headers.items()}
                time.sleep(receiver.delay)
                with receiver._lock:
                    index = min(len(receiver.requests), len(receiver.script) - 1)
                    status = receiver.script[index]
                    receiver.requests.append(
                        Received(
                            headers,
                            body,
                            bool(receiver.secret) and verify(receiver.secret, headers, body),
                            status,
                            time.monotonic(),
                        )
                    )
                self.send_response(status)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._stopper = threading.Timer(DEADLINE_SECONDS, self._server.shutdown)
        self._stopper.daemon = True

    def _serve(self) -> None:
        self._server.serve_forever(poll_interval=0.05)

    def __enter__(self) -> Receiver:
        self._thread.start()
        self._stopper.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._stopper.cancel()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def wait_for(self, count: int) -> list[Received]:
        """Wait until ``count`` requests arrived (or the deadline passed); return them."""
        while len(self.requests) < count and time.monotonic() < self._deadline:
            time.sleep(0.02)
        return list(self.requests)
