"""The engine: the only code that changes workflow state.

Every function exported here is one transition (one ``atomic()`` block) made of
compare-and-set writes plus the Event rows that record it.
"""

from __future__ import annotations

from workflows.engine.lease import Lease
from workflows.engine.leased import (
    claim_compensation,
    claim_item,
    claim_step,
    complete_step,
    fail_attempt,
    heartbeat,
    reclaim,
    reclaim_step,
)
from workflows.engine.start import start_run
from workflows.engine.timers import fire_timer

__all__ = [
    "Lease",
    "claim_compensation",
    "claim_item",
    "claim_step",
    "complete_step",
    "fail_attempt",
    "fire_timer",
    "heartbeat",
    "reclaim",
    "reclaim_step",
    "start_run",
]
