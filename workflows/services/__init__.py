"""The write verbs every surface calls: the admin, the API, commands and user code.

Each verb validates its input (and who is asking) and delegates to one engine
transition; none writes workflow state itself. What they read is in
:mod:`workflows.queries`. One module per concept: runs, steps, leases, gates,
signals, run metadata, budgets and bulk; the verbs are exported here.
"""

from __future__ import annotations

from workflows.services.gates import (
    approve_gate,
    check_decider,
    claim_gate,
    clean_address,
    clean_selections,
    reject_gate,
    unclaim_gate,
)
from workflows.services.leases import revoke_lease
from workflows.services.run_metadata import dismiss_run, set_business_key, undismiss_run
from workflows.services.runs import (
    CancelRequest,
    cancel_run,
    change_priority,
    pause_run,
    request_cancel,
    rerun_from,
    resume_run,
    retry_run,
    start_run,
    start_run_once,
    terminate_run,
)
from workflows.services.signals import (
    complete_callback,
    fail_callback,
    send_signal,
    send_signal_once,
    signals_waited_for,
)
from workflows.services.steps import fail_step, retry_step, skip_step

__all__ = [
    "CancelRequest",
    "approve_gate",
    "cancel_run",
    "change_priority",
    "check_decider",
    "claim_gate",
    "clean_address",
    "clean_selections",
    "complete_callback",
    "dismiss_run",
    "fail_callback",
    "fail_step",
    "pause_run",
    "reject_gate",
    "request_cancel",
    "rerun_from",
    "resume_run",
    "retry_run",
    "retry_step",
    "revoke_lease",
    "send_signal",
    "send_signal_once",
    "set_business_key",
    "signals_waited_for",
    "skip_step",
    "start_run",
    "start_run_once",
    "terminate_run",
    "unclaim_gate",
    "undismiss_run",
]
