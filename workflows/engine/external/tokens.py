"""The lease token an external worker holds: which attempt of which step, for whom.

Signed with Django's signing framework (HMAC-SHA256 over the project's ``SECRET_KEY``),
so a worker cannot make one for work it did not claim. The token names the run, the
step, the attempt and the lease's owner; it grants nothing by itself: every use checks
it against the step's row (:mod:`workflows.engine.external.leases`), so once the attempt
is over (completed, failed, reclaimed, revoked, cancelled) it is useless.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from uuid import UUID

from django.core import signing

from workflows.errors import LeaseLost

SALT = "workflows.external.lease"

# What every refusal of a lease says: which check failed is not told, so a forged token
# learns nothing from the answer.
REFUSED = "the lease is not valid (stale, revoked, expired or not a lease)"


@dataclass(frozen=True)
class LeaseClaims:
    """What a lease token names."""

    run_id: UUID
    step_id: int
    attempt: int
    owner: str
    # When the attempt was claimed (ns since the epoch; 0 in a token minted before it was
    # kept): the start of the attempt's span (workflows.tracing).
    claimed_ns: int = 0


def lease_token(run_id: UUID, step_id: int, attempt: int, owner: str) -> str:
    """Sign the lease of ``attempt`` of step ``step_id`` held by ``owner``, claimed now."""
    claims = {"r": str(run_id), "s": step_id, "a": attempt, "o": owner, "t": time.time_ns()}
    return signing.dumps(claims, salt=SALT)


def read_lease_token(token: object) -> LeaseClaims:
    """The claims of a well-formed, correctly signed token; :class:`LeaseLost` else."""
    if not isinstance(token, str) or not token or len(token) > 2000:
        raise LeaseLost(REFUSED)
    try:
        claims = signing.loads(token, salt=SALT)
        found = LeaseClaims(
            UUID(claims["r"]), claims["s"], claims["a"], claims["o"], claims.get("t", 0)
        )
    except (signing.BadSignature, KeyError, TypeError, ValueError, AttributeError):
        raise LeaseLost(REFUSED) from None
    if not (
        isinstance(found.step_id, int)
        and isinstance(found.attempt, int)
        and isinstance(found.owner, str)
        and isinstance(found.claimed_ns, int)
    ):
        raise LeaseLost(REFUSED)
    return found
