"""Every hold an explanation makes in these tests reads as its sentence: an entry whose
details lack what the :data:`~workflows.holds.HOLDS` table's sentence names fails the
test that made it (``describe`` raises ``KeyError``), whatever that test asserts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.utils import timezone

from workflows.holds import describe
from workflows.queries.explain.records import WaitingOn


@pytest.fixture(autouse=True)
def holds_read_as_sentences(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    made = WaitingOn.__post_init__

    def made_and_worded(entry: WaitingOn) -> None:
        made(entry)
        describe(entry.kind, entry.step, entry.details, timezone.now())

    monkeypatch.setattr(WaitingOn, "__post_init__", made_and_worded)
    yield
