"""Workflows and users shared by the operator console's tests (``test_admin_*.py``)."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.contrib.messages import get_messages

import workflows
from tests.support import users
from workflows import FanOut, Retry, Task, WaitForSignal, Workflow
from workflows.models import Run
from workflows.testing import run_pending

HERE = "tests.admin.admin_console"


def reserve(ctx):
    return {"reserved": ctx.input.get("order", "?")}


def release(ctx):
    return {"released": True}


def pack(ctx):
    return {"packed": ctx.item}


def charge(ctx):
    if ctx.input.get("card") == "declined":
        raise RuntimeError("card declined by the bank")
    return {"charged": True}


class Checkout(Workflow):
    """Reserve, pack three parcels, wait for a shipping signal, charge the card."""

    name = "console_checkout"
    reserve = Task(f"{HERE}.reserve", compensate=f"{HERE}.release")
    pack = FanOut(f"{HERE}.pack", items=lambda ctx: ctx.input["parcels"], key=str)
    shipped = WaitForSignal("shipped")
    charge = Task(f"{HERE}.charge", retry=Retry(max_attempts=1))


class Fragile(Workflow):
    """Fetch, then charge: a declined card fails the run, with nothing to compensate."""

    name = "console_fragile"
    fetch = Task(f"{HERE}.reserve")
    charge = Task(f"{HERE}.charge", retry=Retry(max_attempts=1))


def fragile(card: str = "declined") -> Run:
    """A fragile run, advanced in-process: ``failed`` with a declined card."""
    run = workflows.start_run(Fragile, {"order": "F", "card": card})
    run_pending()
    return Run.objects.get(pk=run.pk)


def checkout(card: str = "valid", order: str = "C-1", *, advance: bool = True) -> Run:
    """A checkout run, advanced in-process until it waits for its signal."""
    run = workflows.start_run(
        Checkout, {"order": order, "card": card, "parcels": [1, 2, 3]}, business_key=order
    )
    if advance:
        run_pending()
    return Run.objects.get(pk=run.pk)


def failed_checkout(order: str = "C-9") -> Run:
    """A checkout whose card is declined: its charge fails, it compensates and ends."""
    run = checkout("declined", order)
    workflows.send_signal(run, "shipped", {"carrier": "post"})
    run_pending()
    return Run.objects.get(pk=run.pk)


ROLES: dict[str, tuple[str, ...]] = {
    "nobody": (),
    "viewer": ("view_run",),
    "starter": ("view_run", "start_run"),
    "operator": ("view_run", "operate_run"),
    "manager": ("view_run", "manage_consumers"),
}


def staff(role: str) -> User:
    """A staff user holding ``role``'s permissions (see :data:`ROLES`)."""
    return users.staff(role, *ROLES[role])


def notes(response) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def noted(response, text: str) -> bool:
    """Whether one of the messages shown after ``response`` contains ``text``."""
    return any(text in note for note in notes(response))
