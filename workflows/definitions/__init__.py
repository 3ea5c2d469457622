"""The workflow DSL: node types, the Workflow base class, the registry."""

from __future__ import annotations

from workflows.definitions.fanout import FanOut
from workflows.definitions.gate import Gate, Option
from workflows.definitions.limits import Budget, RateLimit, Route
from workflows.definitions.loop import Loop
from workflows.definitions.nodes import LeasedNode, Node, Sleep, Task
from workflows.definitions.registry import registry
from workflows.definitions.retry import Retry
from workflows.definitions.schedules import Schedule
from workflows.definitions.waiting import SubWorkflow, WaitForSignal
from workflows.definitions.workflow import Workflow

__all__ = [
    "Budget",
    "FanOut",
    "Gate",
    "LeasedNode",
    "Loop",
    "Node",
    "Option",
    "RateLimit",
    "Retry",
    "Route",
    "Schedule",
    "Sleep",
    "SubWorkflow",
    "Task",
    "WaitForSignal",
    "Workflow",
    "registry",
]
