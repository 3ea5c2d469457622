"""``/work/``: workers outside the process do the steps of ``Task(external=True)``.

A worker in any language claims ready external steps of its queues (``claim``, with
``wait`` a long poll of up to a minute), then for each job heartbeats within its lease
(``heartbeat``), writes log lines (``log``) and ends the attempt (``complete`` or
``fail``), each time presenting the job's lease. Every endpoint calls the verb of
:mod:`workflows.workers.external` a Python worker calls.

Who may: ``workflows.do_external_work`` (:class:`~workflows.api.permissions.CanDoExternalWork`),
a permission of its own, so a service account that does work sees and starts nothing.
Each worker (user and worker name) is throttled on its own
(:class:`~workflows.api.throttling.WorkerRateThrottle`). A lease that is stale
(revoked, expired, attempt over), forged or malformed is a 409 ``lease_lost``, the
same for every cause; a run that asks its work to stop is a 409 ``run_cancelled``.
Either way: drop the job and claim again.
"""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request
from rest_framework.response import Response

from workflows.api.base import FlowsiteViewSet
from workflows.api.errors import error_responses
from workflows.api.examples import request_examples
from workflows.api.long_poll import LongPollViews, holding_wait, timed_out
from workflows.api.permissions import CanDoExternalWork
from workflows.api.runs import validated
from workflows.api.schema import documented_action
from workflows.api.serializers_work import (
    WorkClaimedSerializer,
    WorkClaimSerializer,
    WorkCompleteAnswerSerializer,
    WorkCompleteSerializer,
    WorkFailAnswerSerializer,
    WorkFailSerializer,
    WorkHeartbeatAnswerSerializer,
    WorkHeartbeatSerializer,
    WorkLoggedSerializer,
    WorkLogSerializer,
)
from workflows.api.throttling import WorkerRateThrottle
from workflows.workers.external import (
    claim_external,
    complete_external,
    fail_external,
    heartbeat_external,
    log_external,
)

# Request bodies for the schema, naming the queue of the demo's external step
# (``print_label`` of ``warehouse_dispatch``); a lease is what a claim answered (this
# one is a placeholder of the right shape).
LEASE = "eyJyIjoiMGI5YzNjNmUtNWYzZS00YTUyLTlkNTEtMmYwZDhhMWU3YzExIn0:1tLabel:Signature"
CLAIM = {"queues": ["labels"], "worker": "label-printer-1", "wait": 30}
CLAIM_MANY = {
    "queues": ["labels"],
    "worker": "label-printer-2",
    "limit": 5,
    "capabilities": ["thermal"],
}
HEARTBEAT = {"lease": LEASE, "progress": [1, 2], "message": "printing parcel P-1"}
COMPLETE = {"lease": LEASE, "output": {"label": "LBL-ORD-1002", "parcels": 2}}
FAIL = {"lease": LEASE, "error": "printer out of paper", "failure_class": "transient"}
FAIL_FOR_GOOD = {"lease": LEASE, "error": "the parcel has no address", "permanent": True}
LOG = {"lease": LEASE, "text": "label LBL-ORD-1002 printed", "stream": "stdout"}

# A lease refused (409), and a worker over its rate or a user over its long polls (429).
_LEASE_ERRORS = error_responses(400, 401, 403, 409, 429)


def _verb(request_body: type[Any], answer: type[Any], *examples: tuple[str, dict[str, Any]]) -> Any:
    """The route and schema of one verb: ``POST /work/<verb>/`` taking ``request_body``,
    answered with ``answer`` or an error."""
    schema = {
        "request": request_body,
        "examples": request_examples(*examples),
        "responses": {200: answer, **_LEASE_ERRORS},
    }
    return documented_action(schema, detail=False, methods=["post"])


class WorkViewSet(LongPollViews, FlowsiteViewSet):
    """Claim external work, and heartbeat, log, complete or fail each claimed attempt."""

    permission_classes = [CanDoExternalWork]
    throttle_classes = [WorkerRateThrottle]
    long_poll_actions = frozenset({"claim"})

    @_verb(
        WorkClaimSerializer,
        WorkClaimedSerializer,
        ("Wait for one job", CLAIM),
        ("Claim up to five", CLAIM_MANY),
    )
    def claim(self, request: Request) -> Response:
        """Claim up to ``limit`` ready steps of ``queues``, highest priority first; with
        ``wait``, an empty answer waits for work until the time is up (``timed_out``)."""
        body = validated(request.data, WorkClaimSerializer)
        with holding_wait(request, body["wait"]):
            jobs = claim_external(
                body["queues"],
                worker=body["worker"],
                limit=body["limit"],
                capabilities=body["capabilities"],
                wait=body["wait"],
            )
        answer = {"jobs": jobs, "timed_out": timed_out(body["wait"], bool(jobs))}
        return Response(WorkClaimedSerializer(answer).data)

    @_verb(WorkHeartbeatSerializer, WorkHeartbeatAnswerSerializer, ("Three of ten done", HEARTBEAT))
    def heartbeat(self, request: Request) -> Response:
        """Extend the lease by the step's timeout, reporting progress; 409 when the
        attempt is no longer this worker's (stop the work)."""
        body = validated(request.data, WorkHeartbeatSerializer)
        expires = heartbeat_external(
            body["lease"], progress=body["progress"], message=body["message"]
        )
        return Response(WorkHeartbeatAnswerSerializer({"lease_expires_at": expires}).data)

    @_verb(WorkCompleteSerializer, WorkCompleteAnswerSerializer, ("Done", COMPLETE))
    def complete(self, request: Request) -> Response:
        """Record the output and move the run on; the same output again is a
        ``duplicate``, another one a 409."""
        body = validated(request.data, WorkCompleteSerializer)
        written = complete_external(
            body["lease"],
            body["output"],
            variables=body.get("variables"),
            tags=body.get("tags"),
        )
        return Response(WorkCompleteAnswerSerializer({"duplicate": not written}).data)

    @_verb(
        WorkFailSerializer,
        WorkFailAnswerSerializer,
        ("Retry later", FAIL),
        ("Fail for good", FAIL_FOR_GOOD),
    )
    def fail(self, request: Request) -> Response:
        """Record the attempt as failed: retried per the task's policy unless
        ``permanent``; answers the step's new status."""
        body = validated(request.data, WorkFailSerializer)
        status = fail_external(
            body["lease"],
            body["error"],
            permanent=body["permanent"],
            failure_class=body["failure_class"],
        )
        return Response(WorkFailAnswerSerializer({"status": status}).data)

    @_verb(WorkLogSerializer, WorkLoggedSerializer, ("A line of output", LOG))
    def log(self, request: Request) -> Response:
        """Append a line to the attempt's log (the run page's Log); the lease is not
        extended."""
        body = validated(request.data, WorkLogSerializer)
        log_external(body["lease"], body["text"], body["stream"])
        return Response(WorkLoggedSerializer({}).data)
