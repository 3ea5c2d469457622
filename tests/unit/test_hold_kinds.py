"""What a run waits on is declared once: every :class:`HoldKind` has its row in
:data:`HOLDS`, each row a sentence and the verbs that release it, and every surface
reads the table (the API's enums, the Waits filter). That every entry an explanation
makes reads as its row's sentence is checked where explanations are made
(``tests/queries/conftest.py``)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from workflows.api.serializers_runs import WaitingOnSerializer
from workflows.api.waits import WaitSerializer
from workflows.holds import HOLDS, HoldKind, await_details, describe, listed_kinds
from workflows.queries.waits import WAIT_KINDS
from workflows.services.access import VERBS

FIELD = re.compile(r"\{(\w+)(?::(\w+))?\}")


def test_every_kind_has_its_row_and_no_row_is_without_a_kind():
    assert list(HOLDS) == list(HoldKind)
    assert all(hold.kind is kind for kind, hold in HOLDS.items())


@pytest.mark.parametrize("kind", [kind.value for kind in HoldKind])
def test_each_row_has_a_sentence_and_verbs_that_release_it(kind):
    hold = HOLDS[HoldKind(kind)]
    assert hold.sentence.strip() and hold.released_by.strip()
    assert hold.releases, f"{kind}: no verb releases it"
    unknown = [verb for verb in hold.releases if verb not in VERBS]
    assert unknown == [], f"{kind}: {unknown} are not verbs of workflows.services.access"


@pytest.mark.parametrize("kind", [kind.value for kind in HoldKind])
def test_each_sentence_reads_with_the_details_it_names(kind):
    hold = HOLDS[HoldKind(kind)]
    now = timezone.now()
    details = {name: "x" for name, _ in FIELD.findall(hold.sentence)}
    details.update(due_at=now + timedelta(minutes=5), total=3, unit="step")
    sentence = describe(kind, "charge", details, now)
    assert "{" not in sentence and "[" not in sentence
    # Leaving out a detail the sentence needs (outside its optional pieces) fails loudly.
    required = {name for name, _ in FIELD.findall(re.sub(r"\[[^\]]*\]", "", hold.sentence))}
    for name in required - {"step", "unit", "Unit"} - set(hold.defaults):
        with pytest.raises(KeyError):
            describe(kind, "charge", {k: v for k, v in details.items() if k != name}, now)


def test_optional_pieces_are_said_only_when_their_details_are_set():
    now = timezone.now()
    gate = {"prompt": "Ship it?", "claimed_by": None, "due_at": now + timedelta(hours=2)}
    assert describe("gate", "approve", gate, now) == (
        "Gate “approve” waits for a decision: Ship it?; times out in 2\xa0hours"
    )
    lease = {"unit": "item", "item": "7", "worker": None, "attempt": 1, "max_attempts": 3}
    expired = describe("lease", "fit", {**lease, "expired": True, "expires_at": now}, now)
    assert expired == (
        "Worker ? runs item 7 of “fit” (attempt 1 of 3), lease expired just now"
        " — the worker died or hangs"
    )
    running = describe(
        "lease", "fit", {**lease, "expired": False, "expires_at": now + timedelta(minutes=3)}, now
    )
    assert running.endswith("lease until in 3\xa0minutes")


def test_work_a_cancel_asked_to_stop_says_it_stops_at_its_next_heartbeat():
    now = timezone.now()
    lease = {
        "unit": "step",
        "worker": "w-1",
        "attempt": 3,
        "max_attempts": 4,
        "expired": False,
        "expires_at": now + timedelta(minutes=4),
        "heartbeat_at": now - timedelta(minutes=1),
        "cancel_requested_at": now - timedelta(minutes=2),
    }
    assert describe("lease", "import", lease, now) == (
        "Cancel requested 2\xa0minutes ago; step “import” stops at its next heartbeat "
        "(worker w-1, attempt 3 of 4; last heartbeat 1\xa0minute ago, lease until in "
        "4\xa0minutes)"
    )
    expired = describe("lease", "import", {**lease, "expired": True, "expires_at": now}, now)
    assert expired.endswith("lease expired just now — the worker died or hangs)")


def test_a_detail_that_looks_like_a_placeholder_is_said_as_it_is():
    now = timezone.now()
    sentence = describe("signal", "wait", {"name": "{due_at} [x]"}, now)
    assert sentence == "Step “wait” waits for signal “{due_at} [x]”"


def test_the_waits_and_the_api_offer_the_kinds_of_the_table():
    assert listed_kinds() == WAIT_KINDS
    assert set(WaitSerializer().fields["kind"].choices) == set(WAIT_KINDS)
    assert set(WaitingOnSerializer().fields["kind"].choices) == set(HoldKind)


def test_an_await_names_its_signals_and_its_timeout_or_that_it_has_none():
    now = timezone.now()
    awaiting = {"signals": ["yes", "no"], "since": now.isoformat(), "until": None}
    timed = await_details(awaiting, now + timedelta(hours=4))
    assert describe("await", "import", timed, now) == (
        "Task “import” awaits signal “yes” or “no”; times out in 4\xa0hours"
    )
    assert describe("await", "import", await_details(awaiting, None), now) == (
        "Task “import” awaits signal “yes” or “no” (no timeout)"
    )
    assert "signal" in HOLDS[HoldKind.AWAIT].releases
