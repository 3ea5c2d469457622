"""Signed approval links: a URL that can be emailed to the person who should decide a gate.

The token is ``django.core.signing`` of the step id, the gate's ``version`` and the
intended user's id, with a timestamp and a salt of its own, so it cannot be forged,
replayed against another gate, or passed to someone else. It expires after
``WORKFLOWS["APPROVAL_LINK_MAX_AGE"]``. It works once: every change to the gate (a
decision, a claim, a release) bumps its version, and the link then finds the gate moved
on. Django's signing honours ``SECRET_KEY_FALLBACKS``, so links mailed before a key
rotation keep working until the old key is dropped from the fallbacks.

Reading a link writes nothing; the admin page behind it (``workflows.admin.approvals``)
confirms on GET and decides on POST through the service functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.core import signing
from django.http import HttpRequest
from django.urls import reverse

from workflows.conf import workflow_settings
from workflows.definitions import Gate
from workflows.errors import GateAlreadyDecided, InvalidTransition
from workflows.models import Step
from workflows.queries import get_step
from workflows.status import StepStatus

if TYPE_CHECKING:
    from workflows.permissions import AnyUser

__all__ = ["LINK_SALT", "LinkExpired", "LinkInvalid", "LinkTarget", "approval_link", "read_token"]

# Keeps approval tokens apart from every other signed value of the site (callback
# tokens, sessions): a value signed for another purpose never verifies here.
LINK_SALT = "workflows.approval_link"


class LinkInvalid(Exception):
    """The link was not made by this site (tampered, truncated or signed with a dropped key)."""


class LinkExpired(Exception):
    """The link is genuine but older than ``WORKFLOWS["APPROVAL_LINK_MAX_AGE"]``."""


@dataclass(frozen=True)
class LinkTarget:
    """What a verified token names: the gate, its version when mailed, and the recipient."""

    step: int
    version: int
    user: str


def make_token(step: Step, user: AnyUser) -> str:
    """Sign ``step``'s id and current version for ``user`` (by primary key)."""
    return signing.dumps({"s": step.pk, "v": step.version, "u": str(user.pk)}, salt=LINK_SALT)


def read_token(token: str) -> LinkTarget:
    """Verify ``token`` and return what it names; nothing is read from the database.

    Raises :class:`LinkInvalid` for a bad signature or payload and :class:`LinkExpired`
    for a good signature past its age: the signature is checked first, so a tampered
    old link is "invalid", never "expired".
    """
    max_age = workflow_settings.APPROVAL_LINK_MAX_AGE
    try:
        payload = signing.loads(token, salt=LINK_SALT, max_age=max_age)
    except signing.SignatureExpired:
        raise LinkExpired() from None
    except signing.BadSignature:
        raise LinkInvalid() from None
    try:
        return LinkTarget(step=int(payload["s"]), version=int(payload["v"]), user=str(payload["u"]))
    except (KeyError, TypeError, ValueError):
        # A genuine signature over another shape: only a bug of ours could make one.
        raise LinkInvalid() from None


def approval_link(
    step: Step | int,
    user: AnyUser,
    *,
    request: HttpRequest | None = None,
    base_url: str | None = None,
) -> str:
    """A URL that lets ``user`` confirm and decide the waiting gate ``step``.

    Absolute when ``request`` (its scheme and host) or ``base_url`` (e.g.
    ``"https://ops.example.com"``, for mail sent from a worker) is given, else
    site-relative. The page behind it sends anonymous visitors to the admin login and
    checks on every visit that ``user`` is the one signed in and may still decide the
    gate. Raises :class:`InvalidTransition` for a step that is not a gate and
    :class:`GateAlreadyDecided` for a gate no longer waiting: a mail with a dead link
    helps nobody.
    """
    if request is not None and base_url is not None:
        raise TypeError("approval_link takes request= or base_url=, not both")
    gate = step if isinstance(step, Step) else get_step(step)
    if gate.kind != Gate.kind:
        raise InvalidTransition(f"step {gate.name!r} is a {gate.kind}, not a gate")
    if gate.status != StepStatus.WAITING:
        raise GateAlreadyDecided(
            f"gate {gate.name!r} is {gate.status}, no longer waiting for a decision",
            step=gate.name,
            status=gate.status,
        )
    path = reverse("admin:workflows_approval_link", args=[make_token(gate, user)])
    if request is not None:
        return request.build_absolute_uri(path)
    if base_url is not None:
        return base_url.rstrip("/") + path
    return path
