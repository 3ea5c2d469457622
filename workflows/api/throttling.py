"""Rate limits of the endpoints that need no account: the callbacks and signals by token.

Each is authorised by its signed token alone, so anyone can call it; the limit per
client address keeps token guessing and runaway retry loops cheap to absorb. Both share
one budget (one scope): a client cannot double its calls by spreading them over the two.
"""

from __future__ import annotations

from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.views import APIView

from workflows.conf import workflow_settings


class CallbackRateThrottle(SimpleRateThrottle):
    """``WORKFLOWS["API_CALLBACK_RATE"]`` requests per client address (``None``: no limit).

    The address is ``REMOTE_ADDR``, the one gate decisions record: ``X-Forwarded-For``
    is whatever the client wants it to be, and trusting it would let one client spread
    its calls over invented addresses. Behind a proxy, the project sets ``REMOTE_ADDR``
    from the header it trusts. The counts live in Django's default cache.
    """

    scope = "workflows_callback"

    def get_rate(self) -> str | None:
        return workflow_settings.API_CALLBACK_RATE

    def get_cache_key(self, request: Request, view: APIView) -> str:
        return self.cache_format % {"scope": self.scope, "ident": request.META.get("REMOTE_ADDR")}
