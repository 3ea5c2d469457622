"""Rate limits: of the endpoints that need no account, and of each external worker.

The callbacks and signals by token are authorised by their signed token alone, so
anyone can call them; the limit per client address keeps token guessing and runaway
retry loops cheap to absorb. Both share one budget (one scope): a client cannot double
its calls by spreading them over the two. The external work endpoints are limited per
worker (:class:`WorkerRateThrottle`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.views import APIView

from workflows.conf import workflow_settings
from workflows.engine.external.tokens import read_lease_token
from workflows.errors import LeaseLost
from workflows.text.owners import EXTERNAL_OWNER


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


class WorkerRateThrottle(SimpleRateThrottle):
    """``WORKFLOWS["API_WORKER_RATE"]`` requests per worker of each user (``None``: no
    limit), for the external work endpoints.

    A worker is the user and the worker name: the claim's ``worker``, or the owner its
    lease was claimed by (a lease is signed, so a worker cannot spend another's budget
    by naming it). A request naming no worker (a lease that is not valid, a body that is
    not an object) counts towards the user's nameless budget, and is refused by the
    view anyway. One runaway worker is slowed down; the account's other workers are not.
    """

    scope = "workflows_worker"

    def get_rate(self) -> str | None:
        return workflow_settings.API_WORKER_RATE

    def get_cache_key(self, request: Request, view: APIView) -> str:
        # Hashed: a name is whatever the body says until the view checks it, and a
        # cache key must stay short and printable.
        worker = hashlib.sha256(
            worker_named_by(request.data).encode("utf-8", "surrogatepass")
        ).hexdigest()[:32]
        return self.cache_format % {"scope": self.scope, "ident": f"{request.user.pk}:{worker}"}


def worker_named_by(body: object) -> str:
    """The worker a request of ``/api/work/`` is for: its ``worker`` field, or the owner
    its ``lease`` names once the signature is checked; ``""`` when neither says."""
    if not isinstance(body, Mapping):
        return ""
    if isinstance(body.get("worker"), str):
        return str(body["worker"])
    try:
        return read_lease_token(body.get("lease")).owner.removeprefix(EXTERNAL_OWNER)
    except LeaseLost:
        return ""
