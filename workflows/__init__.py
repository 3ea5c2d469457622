"""Flowsite: durable workflows inside your Django database.

The one list of the public API (``__all__``): node types, limit types, errors, and the
verbs and read functions every surface calls. Definitions and errors import without
Django being set up; the verbs and reads that touch the database (``start_run``, ...)
are loaded on first access, after apps are ready, and typed for checkers by the
``TYPE_CHECKING`` imports.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from workflows.context import Await
from workflows.definitions import (
    Budget,
    FanOut,
    Gate,
    Loop,
    Option,
    RateLimit,
    Retry,
    Route,
    Schedule,
    Sleep,
    SubWorkflow,
    Task,
    WaitForSignal,
    Workflow,
)
from workflows.errors import (
    BusinessKeyInUse,
    CallbackAlreadyUsed,
    CallbackExpired,
    ConsumerNotFound,
    DatabaseBusy,
    DefinitionError,
    DefinitionMissing,
    DependencyUnmet,
    FlowNotFound,
    GateAlreadyDecided,
    GateClaimed,
    IdempotencyConflict,
    InvalidCallbackToken,
    InvalidDecision,
    InvalidFlowChange,
    InvalidInput,
    InvalidTransition,
    LeaseExpired,
    LeaseLost,
    PermanentError,
    RunCancelled,
    RunNotFound,
    ScheduleNotFound,
    SignalTokenExpired,
    SignalTokenForeign,
    SignalTokenInvalid,
    SignalTokenRefused,
    SignalTokenWrongSignal,
    StaleRevision,
    StaleState,
    StaleVersion,
    StepNotFound,
    TooManyWaits,
    TransientError,
    UnknownSignal,
    WaitTimeout,
    WorkflowError,
)
from workflows.status import FailureClass

if TYPE_CHECKING:
    from workflows.approvals import (
        gates_for as gates_for,
    )
    from workflows.approvals.links import (
        approval_link as approval_link,
    )
    from workflows.engine.created import (
        Created as Created,
    )
    from workflows.queries import (
        get_run as get_run,
        get_step as get_step,
        list_runs as list_runs,
        runs_needing_attention as runs_needing_attention,
    )
    from workflows.queries.event_waits import (
        wait_for_events as wait_for_events,
    )
    from workflows.queries.explain import (
        explain as explain,
    )
    from workflows.queries.frames import (
        frames as frames,
    )
    from workflows.queries.results import (
        wait_for as wait_for,
    )
    from workflows.queries.rounds import (
        step_rounds as step_rounds,
    )
    from workflows.queries.waits import (
        pending_waits as pending_waits,
    )
    from workflows.services import (
        approve_gate as approve_gate,
        cancel_run as cancel_run,
        change_priority as change_priority,
        claim_gate as claim_gate,
        complete_callback as complete_callback,
        dismiss_run as dismiss_run,
        fail_callback as fail_callback,
        pause_run as pause_run,
        reject_gate as reject_gate,
        rerun_from as rerun_from,
        resume_run as resume_run,
        retry_run as retry_run,
        retry_step as retry_step,
        revoke_lease as revoke_lease,
        send_signal as send_signal,
        send_signal_once as send_signal_once,
        set_business_key as set_business_key,
        skip_step as skip_step,
        start_run as start_run,
        start_run_once as start_run_once,
        terminate_run as terminate_run,
        unclaim_gate as unclaim_gate,
        undismiss_run as undismiss_run,
    )
    from workflows.services.budgets import (
        budget_counters as budget_counters,
        create_budget as create_budget,
        raise_budget as raise_budget,
        report_usage as report_usage,
        reset_budget as reset_budget,
    )
    from workflows.services.bulk import (
        bulk as bulk,
    )
    from workflows.services.consumers import (
        ack as ack,
        consume as consume,
        create_consumer as create_consumer,
        delete_consumer as delete_consumer,
    )
    from workflows.services.flows import (
        CancelPolicy as CancelPolicy,
        FlowCancellation as FlowCancellation,
        add_dependency as add_dependency,
        add_dependency_once as add_dependency_once,
        add_to_flow as add_to_flow,
        add_to_flow_once as add_to_flow_once,
        cancel_flow as cancel_flow,
        create_flow as create_flow,
        create_flow_once as create_flow_once,
        seal_flow as seal_flow,
        set_join as set_join,
    )
    from workflows.services.leases import (
        RevokedLease as RevokedLease,
    )
    from workflows.services.schedules import (
        BackfillResult as BackfillResult,
        backfill_schedule as backfill_schedule,
        create_schedule as create_schedule,
        create_schedule_once as create_schedule_once,
        delete_schedule as delete_schedule,
        get_schedule as get_schedule,
        next_fire_times as next_fire_times,
        pause_schedule as pause_schedule,
        trigger_schedule as trigger_schedule,
        unpause_schedule as unpause_schedule,
        update_schedule as update_schedule,
    )
    from workflows.services.signal_tokens import (
        send_signal_with_token as send_signal_with_token,
        send_signal_with_token_once as send_signal_with_token_once,
        signal_token as signal_token,
    )
    from workflows.workers.external import (
        ExternalJob as ExternalJob,
        claim_external as claim_external,
        complete_external as complete_external,
        fail_external as fail_external,
        heartbeat_external as heartbeat_external,
        log_external as log_external,
    )

# The verbs and reads that touch the database, loaded on first access (after apps are
# ready): name -> the module that defines it. The TYPE_CHECKING imports above give
# type checkers their real signatures; a test keeps the two lists equal.
_LAZY: dict[str, str] = {
    "approve_gate": "workflows.services",
    "cancel_run": "workflows.services",
    "change_priority": "workflows.services",
    "claim_gate": "workflows.services",
    "complete_callback": "workflows.services",
    "fail_callback": "workflows.services",
    "pause_run": "workflows.services",
    "reject_gate": "workflows.services",
    "rerun_from": "workflows.services",
    "resume_run": "workflows.services",
    "retry_run": "workflows.services",
    "retry_step": "workflows.services",
    "revoke_lease": "workflows.services",
    "RevokedLease": "workflows.services.leases",
    "send_signal": "workflows.services",
    "send_signal_once": "workflows.services",
    "skip_step": "workflows.services",
    "start_run": "workflows.services",
    "start_run_once": "workflows.services",
    "Created": "workflows.engine.created",
    "terminate_run": "workflows.services",
    "unclaim_gate": "workflows.services",
    "dismiss_run": "workflows.services",
    "undismiss_run": "workflows.services",
    "set_business_key": "workflows.services",
    "budget_counters": "workflows.services.budgets",
    "create_budget": "workflows.services.budgets",
    "raise_budget": "workflows.services.budgets",
    "report_usage": "workflows.services.budgets",
    "reset_budget": "workflows.services.budgets",
    "bulk": "workflows.services.bulk",
    "create_flow": "workflows.services.flows",
    "create_flow_once": "workflows.services.flows",
    "add_to_flow": "workflows.services.flows",
    "add_to_flow_once": "workflows.services.flows",
    "add_dependency": "workflows.services.flows",
    "add_dependency_once": "workflows.services.flows",
    "set_join": "workflows.services.flows",
    "seal_flow": "workflows.services.flows",
    "cancel_flow": "workflows.services.flows",
    "CancelPolicy": "workflows.services.flows",
    "FlowCancellation": "workflows.services.flows",
    "ExternalJob": "workflows.workers.external",
    "claim_external": "workflows.workers.external",
    "complete_external": "workflows.workers.external",
    "fail_external": "workflows.workers.external",
    "heartbeat_external": "workflows.workers.external",
    "log_external": "workflows.workers.external",
    "BackfillResult": "workflows.services.schedules",
    "backfill_schedule": "workflows.services.schedules",
    "create_schedule": "workflows.services.schedules",
    "create_schedule_once": "workflows.services.schedules",
    "delete_schedule": "workflows.services.schedules",
    "get_schedule": "workflows.services.schedules",
    "next_fire_times": "workflows.services.schedules",
    "pause_schedule": "workflows.services.schedules",
    "trigger_schedule": "workflows.services.schedules",
    "unpause_schedule": "workflows.services.schedules",
    "update_schedule": "workflows.services.schedules",
    "signal_token": "workflows.services.signal_tokens",
    "send_signal_with_token": "workflows.services.signal_tokens",
    "send_signal_with_token_once": "workflows.services.signal_tokens",
    "gates_for": "workflows.approvals",
    "approval_link": "workflows.approvals.links",
    "get_run": "workflows.queries",
    "get_step": "workflows.queries",
    "list_runs": "workflows.queries",
    "runs_needing_attention": "workflows.queries",
    "explain": "workflows.queries.explain",
    "frames": "workflows.queries.frames",
    "step_rounds": "workflows.queries.rounds",
    "wait_for_events": "workflows.queries.event_waits",
    "consume": "workflows.services.consumers",
    "ack": "workflows.services.consumers",
    "create_consumer": "workflows.services.consumers",
    "delete_consumer": "workflows.services.consumers",
    "wait_for": "workflows.queries.results",
    "pending_waits": "workflows.queries.waits",
}

__all__ = [
    "Await",
    "Budget",
    "CallbackAlreadyUsed",
    "CallbackExpired",
    "ConsumerNotFound",
    "DatabaseBusy",
    "DefinitionError",
    "DefinitionMissing",
    "DependencyUnmet",
    "BusinessKeyInUse",
    "FailureClass",
    "FanOut",
    "FlowNotFound",
    "Gate",
    "Loop",
    "GateAlreadyDecided",
    "GateClaimed",
    "IdempotencyConflict",
    "InvalidCallbackToken",
    "InvalidDecision",
    "InvalidFlowChange",
    "InvalidInput",
    "InvalidTransition",
    "LeaseExpired",
    "LeaseLost",
    "Option",
    "PermanentError",
    "RateLimit",
    "Retry",
    "Route",
    "RunCancelled",
    "RunNotFound",
    "Schedule",
    "ScheduleNotFound",
    "SignalTokenExpired",
    "SignalTokenForeign",
    "SignalTokenInvalid",
    "SignalTokenRefused",
    "SignalTokenWrongSignal",
    "Sleep",
    "StaleRevision",
    "StaleState",
    "StaleVersion",
    "StepNotFound",
    "SubWorkflow",
    "Task",
    "TooManyWaits",
    "TransientError",
    "UnknownSignal",
    "WaitForSignal",
    "WaitTimeout",
    "Workflow",
    "WorkflowError",
    *_LAZY,
]


def __getattr__(name: str) -> object:
    """Load a verb or read function of :data:`_LAZY` on first access (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'workflows' has no attribute {name!r}")
    return getattr(import_module(module), name)
