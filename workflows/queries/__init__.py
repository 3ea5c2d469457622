"""The read side: what surfaces show and ``explain`` tells, read without opening
``atomic()`` (a read never takes SQLite's write lock). Runs and steps are exported here;
:mod:`~workflows.queries.explain` (``explain``) and :mod:`~workflows.queries.workers`
(worker presence) are modules of their own."""

from __future__ import annotations

from workflows.queries.runs import (
    Attention,
    DefinitionReport,
    attention_of,
    check_definitions,
    describe_run,
    dismissed_filter,
    expired_lease,
    get_run,
    get_step,
    list_runs,
    overdue_timer,
    render_definition,
    run_summary,
    runs_needing_attention,
    signal_summary,
    step_summary,
    undispatched_unit,
)

__all__ = [
    "Attention",
    "DefinitionReport",
    "attention_of",
    "check_definitions",
    "describe_run",
    "dismissed_filter",
    "expired_lease",
    "get_run",
    "get_step",
    "list_runs",
    "overdue_timer",
    "render_definition",
    "run_summary",
    "runs_needing_attention",
    "signal_summary",
    "step_summary",
    "undispatched_unit",
]
