"""What the tests of who may call a verb share: a waiting workflow with a budget, a gated
one, and a fixture recording which rows of the verb table a surface asked."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.handlers import NOOP
from workflows import Budget, Gate, Task, WaitForSignal, Workflow
from workflows.services.access import Access


class Waiting(Workflow):
    name = "verb_access_waiting"
    budgets = [Budget("tokens", 100)]
    paid = WaitForSignal("paid")


class Leased(Workflow):
    """A task a test claims and leaves running, for the verbs on running work (revoke)."""

    name = "verb_access_leased"
    work = Task(NOOP)


class Reviewed(Workflow):
    name = "verb_access_reviewed"
    review = Gate(prompt="Ship?", permission="workflows.view_step")


def recording(monkeypatch: pytest.MonkeyPatch, method: str) -> list[Access]:
    """Record each :class:`Access` row whose ``method`` is called, then call it."""
    seen: list[Access] = []
    original = getattr(Access, method)

    def record(self: Access, user: Any) -> Any:
        seen.append(self)
        return original(self, user)

    monkeypatch.setattr(Access, method, record)
    return seen


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[Access]:
    """The rows a surface asked about a signed-in user (:meth:`Access.allows`)."""
    return recording(monkeypatch, "allows")
