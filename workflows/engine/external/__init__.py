"""External work: the steps of ``Task(external=True)``, done by workers outside the process.

A worker in any language claims ready external steps of the queues it serves, gets for
each a signed lease token (:mod:`.tokens`), and heartbeats, completes or fails the
attempt by presenting it (:mod:`.leases`). The claim is the in-process claim's
compare-and-set (:func:`~workflows.engine.claims.begin_attempt`), the outcomes are the
in-process outcomes (:mod:`workflows.engine.outcomes`), fenced the same way; what is
new is that the lease travels as a token and is checked whole before anything is
written, so a stale, forged or malformed one writes nothing.
"""

from workflows.engine.external.claiming import ExternalClaim, claim_external_units
from workflows.engine.external.leases import (
    complete_external_lease,
    fail_external_lease,
    heartbeat_external_lease,
    held_lease,
)
from workflows.engine.external.tokens import lease_token
from workflows.engine.outcomes import Completion

__all__ = [
    "Completion",
    "ExternalClaim",
    "claim_external_units",
    "complete_external_lease",
    "fail_external_lease",
    "heartbeat_external_lease",
    "held_lease",
    "lease_token",
]
