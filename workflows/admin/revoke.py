"""The console's "Revoke lease": take a running attempt from a wedged worker.

Offered on a running step of the run page (and on a running compensation), it leads to
the run's action page (:func:`workflows.admin.actions.run_action`), where the operator
picks the running attempt — of a task step, a fan-out item, a compensation — each
shown with its attempt, the worker holding it and when its lease runs out, gives a
reason, and confirms. The page carries the attempt it showed of each unit (a hidden
field), and the POST revokes that attempt only, through
:func:`workflows.services.revoke_lease` as the API and ``workflows_revoke`` do: a
double click, or a unit that stopped running or moved to a newer attempt meanwhile,
changes nothing and says why, as a message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from django import forms
from django.utils import timezone
from django.utils.formats import date_format

from workflows import services
from workflows.definitions import FanOut
from workflows.errors import InvalidTransition
from workflows.models import CompensationRecord, FanOutItem, Run, Step
from workflows.services.leases import not_revoked_text, shown_attempts
from workflows.status import StepStatus
from workflows.text import lease_holder

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from workflows.permissions import AnyUser
    from workflows.services.leases import LeasedUnit

__all__ = ["RevokeForm", "revoke"]

# Running attempts listed per kind: a run rarely has more; a fan-out's are its workers'.
SHOWN = 100
_MODELS: dict[str, type[Step] | type[FanOutItem] | type[CompensationRecord]] = {
    "step": Step,
    "item": FanOutItem,
    "compensation": CompensationRecord,
}


def _running(run: Run) -> list[tuple[str, LeasedUnit]]:
    """The run's running attempts as ("kind:id", unit): task steps, items, compensations."""
    steps: QuerySet[Step] = Step.objects.filter(run_id=run.pk, status=StepStatus.RUNNING)
    items = FanOutItem.objects.filter(step__run_id=run.pk, status=StepStatus.RUNNING)
    records = CompensationRecord.objects.filter(run_id=run.pk, status=StepStatus.RUNNING)
    found: list[tuple[str, LeasedUnit]] = []
    for step in steps.exclude(kind=FanOut.kind).order_by("id")[:SHOWN]:
        found.append((f"step:{step.pk}", step))
    for item in items.select_related("step").order_by("step_id", "index")[:SHOWN]:
        found.append((f"item:{item.pk}", item))
    for record in records.select_related("step", "item").order_by("-sequence")[:SHOWN]:
        found.append((f"compensation:{record.pk}", record))
    return found


def _label(unit: LeasedUnit) -> str:
    """The attempt as the operator needs to recognise it: which work, which attempt, held
    by which worker, until when."""
    if isinstance(unit, FanOutItem):
        what = f"item “{unit.key}” of step “{unit.step.name}”"
    elif isinstance(unit, CompensationRecord):
        of_item = f", item “{unit.item.key}”" if unit.item is not None else ""
        what = f"compensation of step “{unit.step.name}”{of_item}"
    else:
        what = f"step “{unit.name}”"
    held = f"attempt {shown_attempts(unit)}, held by {lease_holder(unit.lease_owner)}"
    if unit.lease_expires_at is not None:
        until = date_format(timezone.localtime(unit.lease_expires_at), "Y-m-d H:i:s")
        expired = " (expired)" if unit.lease_expires_at < timezone.now() else ""
        held += f", lease until {until}{expired}"
    return f"{what}: {held}"


def _preselected(running: list[tuple[str, LeasedUnit]], step_id: Any) -> str | None:
    """The running attempt the run page's button was for: the step's own, its first
    running item's, or its running compensation's."""
    try:
        wanted = int(step_id)
    except (TypeError, ValueError):
        return None
    for value, unit in running:
        if (unit.pk if isinstance(unit, Step) else unit.step_id) == wanted:
            return value
    return None


def _shown(running: list[tuple[str, LeasedUnit]]) -> str:
    """The attempts the page shows, as its hidden field carries them: "kind:id=N ...",
    a step's as "step:id=N@R" (attempt N of its round R)."""
    return " ".join(
        f"{value}={shown_attempts(unit).attempt}"
        + (f"@{unit.round}" if isinstance(unit, Step) else "")
        for value, unit in running
    )


def _attempt_shown(shown: str, value: str) -> tuple[int, int | None] | None:
    """The attempt (and a step's round) the page showed of unit ``value``, from its
    hidden field."""
    for pair in shown.split():
        unit, _, seen = pair.partition("=")
        attempt, _, round_ = seen.partition("@")
        if unit == value and attempt.isdigit() and (not round_ or round_.isdigit()):
            return int(attempt), int(round_) if round_ else None
    return None


class RevokeForm(forms.Form):
    """Which running attempt to revoke, and why; pinned to the attempt the page showed."""

    unit = forms.ChoiceField(widget=forms.RadioSelect, label="Running attempt")
    # The attempt shown of each unit listed: the revoke takes that attempt or nothing.
    attempts = forms.CharField(widget=forms.HiddenInput, required=False, max_length=20_000)
    reason = forms.CharField(
        required=False,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
        help_text="Kept in the run's history with your name.",
    )

    def __init__(self, *args: Any, run: Run, **kwargs: Any) -> None:
        initial = kwargs.get("initial") or {}
        super().__init__(*args, **kwargs)
        self.run = run
        running = _running(run)
        choices = [(value, _label(unit)) for value, unit in running]
        posted = self.data.get("unit") if self.is_bound else None
        if posted and posted not in dict(choices) and self._unit_of_run(posted) is not None:
            # It stopped running since the page was shown: the engine says why on POST.
            choices.append((posted, f"{posted} (no longer running)"))
        field = self.fields["unit"]
        assert isinstance(field, forms.ChoiceField)  # declared so above
        field.choices = choices
        field.initial = _preselected(running, initial.get("step"))
        self.fields["attempts"].initial = _shown(running)
        field.help_text = (
            "The worker that holds it loses it now: its next heartbeat raises LeaseLost "
            "and its result is refused. The work goes back to ready and runs again, "
            "without using up an attempt."
            if choices
            else "Nothing of this run is running now: there is no lease to revoke."
        )

    def _unit_of_run(self, value: str) -> LeasedUnit | None:
        """The unit ``value`` ("kind:id") names, if it is one of this run's, else ``None``."""
        kind, _, pk = value.partition(":")
        model = _MODELS.get(kind)
        if model is None or not pk.isdigit():
            return None
        run_path = "step__run_id" if model is FanOutItem else "run_id"
        found: LeasedUnit | None = model.objects.filter(
            pk=int(pk), **{run_path: self.run.pk}
        ).first()
        return found

    def clean_unit(self) -> LeasedUnit:
        unit = self._unit_of_run(self.cleaned_data["unit"])
        if unit is None:
            raise forms.ValidationError("That is not running work of this run.")
        return unit

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if "unit" in data:
            seen = _attempt_shown(data.get("attempts") or "", self.data.get("unit", ""))
            if seen is None:
                raise forms.ValidationError(
                    "The page did not say which attempt it showed; nothing was revoked. "
                    "Look at the attempt below and confirm again."
                )
            data["attempt"], data["round"] = seen
        return data


def revoke(run: Run, data: dict[str, Any], user: AnyUser) -> str:
    """Revoke the chosen attempt; say what happened, for the success message."""
    unit: LeasedUnit = data["unit"]  # one of this run's (RevokeForm.clean_unit)
    attempt: int = data["attempt"]  # the one the page showed (RevokeForm.clean)
    result = services.revoke_lease(
        unit,
        expected_attempt=attempt,
        expected_round=data["round"],
        reason=data["reason"],
        user=user,
    )
    revoked = cast("LeasedUnit", result.unit)
    if not result.revoked:
        raise InvalidTransition(
            f"attempt {attempt} of {_what(revoked)} {not_revoked_text(result)}; "
            f"it is {revoked.status} in attempt {shown_attempts(revoked).attempt}",
            reason=result.reason,
        )
    error = revoked.error or {}
    then = (
        "it is ready and runs again"
        if revoked.status == StepStatus.READY
        else f"it is {revoked.status}: its run had stopped"
    )
    return (
        f"revoked attempt {result.attempt} of {_what(revoked)}, held by "
        f"{lease_holder(error.get('owner') or '')}; {then}"
    )


def _what(unit: LeasedUnit) -> str:
    if isinstance(unit, FanOutItem):
        return f"item “{unit.key}” of step “{unit.step.name}”"
    if isinstance(unit, CompensationRecord):
        return f"the compensation of step “{unit.step.name}”"
    return f"step “{unit.name}”"
