"""The workflow DSL: node types, the Workflow base class, the registry."""

from __future__ import annotations

from workflows.definitions.nodes import Node, Sleep, Task
from workflows.definitions.registry import registry
from workflows.definitions.retry import Retry
from workflows.definitions.workflow import Workflow

__all__ = ["Node", "Retry", "Sleep", "Task", "Workflow", "registry"]
