"""Approvals: who may decide a gate (:mod:`~workflows.approvals.deciders`) and the signed
links that let one person decide one gate (:mod:`~workflows.approvals.links`)."""

from __future__ import annotations

from workflows.approvals.deciders import (
    GateCount,
    WaitingGate,
    count_waiting_gates,
    decidable_by,
    gates_for,
    may_override_claim,
    may_override_rule,
    signed_in,
    waiting_gates,
)

__all__ = [
    "GateCount",
    "WaitingGate",
    "count_waiting_gates",
    "decidable_by",
    "gates_for",
    "may_override_claim",
    "may_override_rule",
    "signed_in",
    "waiting_gates",
]
