"""``Gate``: a step that waits for a person to approve or reject."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from workflows.definitions.nodes import Condition, Node, timeout_problems
from workflows.errors import InvalidDecision
from workflows.status import Decision, NodeKind

ON_TIMEOUT = ("reject", "approve", "fail")
ON_REJECT = ("fail", "continue")
# What the output of a skipped gate may say: the parts of a decision a person makes.
SKIP_OUTPUT_KEYS = ("decision", "selections", "feedback")


def check_selections(
    gate: str, allowed: Sequence[str], low: int, high: int | None, selections: Any
) -> list[str]:
    """``selections`` as a list, if they fit the gate's options and counts.

    ``allowed`` are the option values, ``low``/``high`` the gate's ``min_selections``
    and ``max_selections``. Raises :class:`InvalidDecision` naming the gate and the
    problem. One check for a decision (on the waiting step's copy of the options) and
    for a skip (on the definition's, which a gate not yet reached has no copy of).
    """
    if selections is None:
        selections = []
    if not isinstance(selections, list | tuple):
        raise InvalidDecision(
            f"selections for gate {gate!r} must be a list of option values, "
            f"got {type(selections).__name__} {selections!r}"
        )
    chosen = list(selections)
    for value in chosen:
        if not isinstance(value, str):
            raise InvalidDecision(
                f"selections for gate {gate!r} must be option values (strings), "
                f"got {type(value).__name__} {value!r}"
            )
    allowed = list(allowed)
    unknown = [value for value in chosen if value not in allowed]
    if unknown:
        raise InvalidDecision(
            f"gate {gate!r} has no option {unknown[0]!r}; allowed: {allowed}", allowed=allowed
        )
    if len(set(chosen)) != len(chosen):
        raise InvalidDecision(f"gate {gate!r}: an option was selected twice: {chosen}")
    if len(chosen) < low or (high is not None and len(chosen) > high):
        raise InvalidDecision(
            f"gate {gate!r} needs {_counted_selections(low, high)}, got {len(chosen)}",
            allowed=allowed,
        )
    return chosen


def _counted_selections(low: int, high: int | None) -> str:
    """``at least 1 selection``, ``at most 1 selection``, ``exactly 2 selections``,
    ``1 to 3 selections``."""
    if high is None:
        span, last = f"at least {low}", low
    elif low == 0:
        span, last = f"at most {high}", high
    elif low == high:
        span, last = f"exactly {low}", low
    else:
        span, last = f"{low} to {high}", high
    return f"{span} selection{'' if last == 1 else 's'}"


@dataclass(frozen=True)
class SkipDecision:
    """The decision an operator's skip records on a gate, read from the skip's output."""

    decision: str
    selections: list[str]
    feedback: str


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

    kind = NodeKind.GATE

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

    def step_columns(self) -> dict[str, Any]:
        """Who may decide the gate, on its step from the run's start (see ``decidable_by``)."""
        return {
            "permission": self.permission,
            "assignees": {"users": self.assignee_users, "groups": self.assignee_groups},
        }

    def skip_decision(self, output: Any) -> SkipDecision:
        """The decision a skip with ``output`` records, if it is one this gate accepts.

        ``output`` is ``None`` (an approval without selections) or an object with
        ``decision`` (``approved`` by default, or ``rejected``), ``selections`` (checked
        against the options and counts as a decision's are) and ``feedback``. A
        rejection is refused on a gate whose rejection fails the run: skipping moves a
        run on, rejecting is a decision of its own. Raises :class:`InvalidDecision`.
        """
        if output is None:
            output = {}
        if not isinstance(output, dict):
            raise InvalidDecision(
                f"the output of skipped gate {self.name!r} must be an object with "
                f"{', '.join(SKIP_OUTPUT_KEYS)}, got {type(output).__name__}"
            )
        unknown = sorted(set(output) - set(SKIP_OUTPUT_KEYS))
        if unknown:
            raise InvalidDecision(
                f"the output of skipped gate {self.name!r} has unknown keys {unknown}; "
                f"it takes {', '.join(SKIP_OUTPUT_KEYS)}"
            )
        decision = output.get("decision", Decision.APPROVED)
        if decision not in Decision.values:
            raise InvalidDecision(
                f"the decision of skipped gate {self.name!r} must be one of "
                f"{Decision.values}, got {decision!r}"
            )
        if decision == Decision.REJECTED and self.on_reject == "fail":
            raise InvalidDecision(
                f"gate {self.name!r} fails its run when rejected: reject it instead of "
                "skipping it with a rejection"
            )
        feedback = output.get("feedback", "")
        if not isinstance(feedback, str):
            raise InvalidDecision(
                f"the feedback of skipped gate {self.name!r} must be a string, "
                f"got {type(feedback).__name__}"
            )
        selections = output.get("selections")
        if decision == Decision.REJECTED:
            if selections:
                raise InvalidDecision(f"a rejection of gate {self.name!r} selects no options")
            chosen: list[str] = []
        else:
            values = [option.value for option in self.options]
            chosen = check_selections(
                self.name, values, self.min_selections, self.max_selections, selections
            )
        return SkipDecision(decision, chosen, feedback)

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
        if self.on_timeout == "approve" and self.min_selections:
            found.append(
                f"on_timeout='approve' approves with no selections, but min_selections="
                f"{self.min_selections}: choose on_timeout='reject' or 'fail'"
            )
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
