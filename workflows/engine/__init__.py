"""The engine: the only code that changes workflow state.

Every function exported here is one transition (one ``atomic()`` block) made of
compare-and-set writes plus the Event rows that record it; see
:mod:`workflows.engine.scope` for the frame each is written in.

The rule: every state-changing UPDATE states the state it expects in its WHERE clause
and bumps ``version`` — one row (``sql.updates.cas_update``) or a set
(``sql.updates.cas_update_many``, which returns the rows it changed; only those get
events). Never read ids, then update by id. Importing the package loads every node
module, which registers how its steps are entered, settled and timed out, the
settling of flows, which registers what a member's end does to its downstream members,
and run deadlines, which register what a deadline timer does to its run.
"""

from __future__ import annotations

from workflows.engine import deadlines  # noqa: F401 - registers the deadline timer's effect
from workflows.engine.claims import claim, claim_step
from workflows.engine.flows import settle  # noqa: F401 - registers the run-end hook of flows
from workflows.engine.lease import Lease
from workflows.engine.loops import polling  # noqa: F401 - registers the poll's timer effect
from workflows.engine.nodes import (  # noqa: F401 - node modules register themselves
    awaits,
    callback,
    compensation,
    fanout,
    gate,
    loop,
    sleep,
    subworkflow,
    task,
    wait_for_signal,
)
from workflows.engine.outcomes import complete_work, fail_attempt, heartbeat
from workflows.engine.recovery import reclaim
from workflows.engine.start import start_run_once
from workflows.engine.timers import fire_timer
from workflows.engine.verbs.pause import pause_run, resume_run
from workflows.engine.verbs.rerun import rerun_from
from workflows.engine.verbs.terminate import terminate_run
from workflows.engine.work_kinds import COMPENSATION, ITEM, STEP, WORK_KINDS, WorkKind

__all__ = [
    "COMPENSATION",
    "ITEM",
    "STEP",
    "WORK_KINDS",
    "Lease",
    "WorkKind",
    "claim",
    "claim_step",
    "complete_work",
    "fail_attempt",
    "fire_timer",
    "heartbeat",
    "pause_run",
    "reclaim",
    "rerun_from",
    "resume_run",
    "start_run_once",
    "terminate_run",
]
