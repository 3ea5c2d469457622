"""What a console page offers the signed-in user, and what it lists under "Not possible now".

The run page, the gate page and the flow page each show their actions in two lists: the
ones offered (buttons) and the ones withheld, each with its reason. An action is
withheld for the state it finds, in the guard's own words (the explanation's verdict,
:func:`workflows.queries.explain.allowed_actions`; a flow action's ``refusal``), or for
who asks. Who may is asked of the very checks the verbs make, and the reason shown is
their refusal's text, so a page never offers what the verb then refuses nor withholds
what it would accept:

- the verb table (:data:`workflows.services.access.VERBS`), which the console's action
  views ask before they run a verb (:meth:`Access.allows`, its :attr:`Access.refusal`);
- for a verb on a gate, the gate's own rule as :mod:`workflows.services.gates` checks
  it: :func:`check_decider` before a decision or a claim, :func:`skip_overrides_rule`
  before a skip (which decides the gate). Each is asked once per gate and page.

What a page shows is advice, as for the state: the verb checks again when it runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.core.exceptions import PermissionDenied
from django.urls import reverse

from workflows.admin.actions import RUN_ACTIONS
from workflows.services.access import VERBS
from workflows.services.gates import check_decider, skip_overrides_rule

if TYPE_CHECKING:
    from workflows.models import Run, Step
    from workflows.permissions import AnyUser
    from workflows.queries.explain import Action

__all__ = ["GATE_RULES", "Asker", "Offer", "because", "gate_offers", "label", "run_offers", "split"]

# The check a verb on a gate makes of the gate's rule, beyond the verb table's row.
GATE_RULES: dict[str, Callable[[Step, AnyUser], object]] = {
    "approve": check_decider,
    "reject": check_decider,
    "claim": check_decider,
    "release": check_decider,
    "skip_step": skip_overrides_rule,
}

# How a verb's button reads (the step's name follows); a verb not listed is its name.
LABELS = {
    "approve": "Decide gate",
    "claim": "Claim",
    "retry_step": "Retry",
    "skip_step": "Skip",
    "revoke": "Revoke lease",
    "signal": "Send a signal",
    "business_key": "Set business key",
}


@dataclass(frozen=True)
class Offer:
    """An action as a page shows it: a button to ``url`` when ``reason`` is ``None``,
    else a line under "Not possible now" saying why (the state's reason first, then
    each permission the user lacks)."""

    verb: str
    label: str
    summary: str
    url: str
    reason: str | None = None
    step: str | None = None
    step_id: int | None = None

    @property
    def offered(self) -> bool:
        return self.reason is None


@dataclass
class Asker:
    """Asks whether ``user`` may use a verb, each gate's rule once per page (a rule
    costs a query: :func:`workflows.approvals.decidable_by`)."""

    user: AnyUser
    _asked: dict[tuple[Callable[..., object], int], str | None] = field(default_factory=dict)

    def refusals(self, verb: str, gate: Step | None = None) -> list[str]:
        """Why the user may not use ``verb`` (on ``gate``, a gate step): empty if they may."""
        found = []
        access = VERBS[verb]
        # A row naming no permission (the gate verbs) leaves it to the gate's rule.
        if access.permission is not None and not access.allows(self.user):
            found.append(access.refusal)
        rule = GATE_RULES.get(verb)
        if gate is not None and rule is not None:
            key = (rule, gate.pk)
            if key not in self._asked:
                self._asked[key] = _refusal_of(rule, gate, self.user)
            refusal = self._asked[key]
            if refusal is not None:
                found.append(refusal)
        return found


def _refusal_of(rule: Callable[[Step, AnyUser], object], gate: Step, user: AnyUser) -> str | None:
    try:
        rule(gate, user)
    except PermissionDenied as error:
        return str(error)
    return None


def because(state: str | None, permissions: list[str]) -> str | None:
    """Why an action is withheld: the state's reason, then each permission lacking
    (``None``: nothing withholds it)."""
    reasons = ([state] if state else []) + permissions
    return "; ".join(reasons) if reasons else None


def label(verb: str, step: str | None = None) -> str:
    """A verb's button text: ``Cancel``, ``Skip “charge”``, ``Decide gate “review”``."""
    named = f" “{step}”" if step else ""
    return f"{LABELS.get(verb, verb.capitalize())}{named}"


def split(offers: Iterable[Offer]) -> tuple[list[Offer], list[Offer]]:
    """The offered actions and the withheld ones, each in the order given."""
    offered: list[Offer] = []
    withheld: list[Offer] = []
    for offer in offers:
        (offered if offer.offered else withheld).append(offer)
    return offered, withheld


def run_offers(
    user: AnyUser,
    run: Run,
    actions: Iterable[Action],
    gates: Mapping[int, Step],
    admin_name: str,
    *,
    may_signal: bool,
) -> tuple[list[Offer], list[Offer]]:
    """The run page's actions for ``user``: the explanation's ``actions`` (``gates``: the
    run's gate steps by id) and, where a step waits for one, sending a signal.

    A gate's decision is one action, "Decide gate", leading to the gate's page: approving
    and rejecting ask the same rule, so the explanation's ``reject`` is not listed again.
    """
    asker = Asker(user)
    offers = []
    for action in actions:
        if action.verb == "reject":
            continue
        gate = gates.get(action.step_id) if action.step_id is not None else None
        if action.verb == "approve":
            url = reverse(f"{admin_name}:workflows_approval", args=[action.step_id])
        else:
            url = reverse(f"{admin_name}:workflows_run_act", args=[run.pk, action.verb])
            url += f"?step={action.step_id}" if action.step_id else ""
        offers.append(
            Offer(
                verb=action.verb,
                label=label(action.verb, action.step),
                summary=action.summary,
                url=url,
                reason=because(action.reason, asker.refusals(action.verb, gate)),
                step=action.step,
                step_id=action.step_id,
            )
        )
    if may_signal:
        offers.append(
            Offer(
                verb="signal",
                label=label("signal"),
                summary=RUN_ACTIONS["signal"].summary,
                url=reverse(f"{admin_name}:workflows_run_act", args=[run.pk, "signal"]),
                reason=because(None, asker.refusals("signal")),
            )
        )
    return split(offers)


def gate_offers(
    user: AnyUser, gate: Step, decide_url: str, claim_url: str, *, claimed: bool
) -> tuple[list[Offer], list[Offer]]:
    """The gate page's actions for ``user``: deciding the waiting ``gate`` and, while no
    one has claimed it, claiming it (both the gate's rule, asked once)."""
    asker = Asker(user)
    offers = [
        Offer(
            verb="approve",
            label=label("approve", gate.name),
            summary="approve or reject the gate",
            url=decide_url,
            reason=because(None, asker.refusals("approve", gate)),
            step=gate.name,
            step_id=gate.pk,
        )
    ]
    if not claimed:
        offers.append(
            Offer(
                verb="claim",
                label=label("claim"),
                summary="say that you are deciding it: others may not until you release it",
                url=claim_url,
                reason=because(None, asker.refusals("claim", gate)),
                step=gate.name,
                step_id=gate.pk,
            )
        )
    return split(offers)
