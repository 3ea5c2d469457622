"""``Gate``: a step that waits for a person to approve or reject."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from workflows.definitions.nodes import Condition, Node, timeout_problems

ON_TIMEOUT = ("reject", "approve", "fail")
ON_REJECT = ("fail", "continue")


@dataclass(frozen=True)
class Option:
    """One choice offered by a gate: the stored ``value`` and the ``label`` people see."""

    value: str
    label: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"value": self.value, "label": self.label or self.value}


class Gate(Node):
    """Wait for a human decision.

    ``prompt`` is formatted with ``input`` (the run's input) and ``steps`` (earlier
    outputs by step name), e.g. ``"Ship order {input[order_id]}?"``. Deciders need
    ``permission`` (``"app.codename"``) or must be among ``assignees`` (usernames, or
    ``"group:<name>"``); a gate naming neither accepts any authenticated user. On
    ``timeout`` the gate is decided per ``on_timeout``. A rejection fails the step and
    the run, unless ``on_reject="continue"``: then the step completes with the rejected
    decision as its output and later steps can route on it with ``when=``.
    """

    kind = "gate"

    def __init__(
        self,
        prompt: str = "",
        *,
        options: Sequence[Option] = (),
        min_selections: int = 0,
        max_selections: int | None = None,
        timeout: timedelta | None = None,
        on_timeout: str = "reject",
        on_reject: str = "fail",
        permission: str | None = None,
        assignees: Sequence[str] = (),
        after: Sequence[str] | str | None = None,
        when: Condition | None = None,
    ) -> None:
        super().__init__(after=after, when=when)
        self.prompt = prompt
        self.options = list(options)
        self.min_selections = min_selections
        self.max_selections = max_selections
        self.timeout = timeout
        self.on_timeout = on_timeout
        self.on_reject = on_reject
        self.permission = permission or ""
        self.assignees = list(assignees)

    @property
    def assignee_users(self) -> list[str]:
        return [name for name in self.assignees if not name.startswith("group:")]

    @property
    def assignee_groups(self) -> list[str]:
        return [name.removeprefix("group:") for name in self.assignees if name.startswith("group:")]

    def problems(self) -> list[str]:
        found = super().problems()
        if not all(isinstance(option, Option) for option in self.options):
            found.append("options must be Option(value, label) instances")
            return found
        values = [option.value for option in self.options]
        duplicates = sorted({value for value in values if values.count(value) > 1})
        if duplicates:
            found.append(f"duplicate option values {duplicates}")
        if not isinstance(self.min_selections, int) or self.min_selections < 0:
            found.append(f"min_selections must be an integer >= 0, got {self.min_selections!r}")
        elif self.min_selections > len(values):
            found.append(
                f"min_selections={self.min_selections} but only {len(values)} options exist"
            )
        if self.max_selections is not None and (
            not isinstance(self.max_selections, int) or self.max_selections < self.min_selections
        ):
            found.append(
                f"max_selections must be an integer >= min_selections, got {self.max_selections!r}"
            )
        found.extend(timeout_problems(self.timeout))
        if self.on_timeout not in ON_TIMEOUT:
            found.append(f"on_timeout must be one of {ON_TIMEOUT}, got {self.on_timeout!r}")
        if self.on_reject not in ON_REJECT:
            found.append(f"on_reject must be one of {ON_REJECT}, got {self.on_reject!r}")
        if self.permission and self.permission.count(".") != 1:
            found.append(f"permission must look like 'app_label.codename', got {self.permission!r}")
        return found

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "prompt": self.prompt,
            "options": [option.as_dict() for option in self.options],
            "min_selections": self.min_selections,
            "max_selections": self.max_selections,
            "timeout": self.timeout.total_seconds() if self.timeout else None,
            "on_timeout": self.on_timeout,
            "on_reject": self.on_reject,
            "permission": self.permission or None,
            "assignees": self.assignees,
        }
