"""``{% approvals_inbox as approvals %}``: the admin index's link to the approvals inbox.

A template tag rather than a context processor, so the approvals query runs only on the
page that shows the link. A host project puts it in its ``admin/index.html`` override
(the demo project's ``templates/admin/index.html`` shows how).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import template
from django.urls import reverse

from workflows.admin.approvals import inbox_visible
from workflows.approvals import count_waiting_gates

if TYPE_CHECKING:
    from workflows.permissions import AnyUser

register = template.Library()


@register.simple_tag(takes_context=True)
def approvals_inbox(context: dict[str, Any]) -> dict[str, Any]:
    """Whether the inbox is the user's, its link, and the number of gates waiting for them
    (a bounded count: every admin page's sidebar shows it).

    A value rather than markup, so the index can also leave out Django's "You don't have
    permission to view or edit anything" for an approver who may use nothing else. The
    link and count are given to every staff user: the approvals pages' own sidebar
    shows them even when nothing waits (``visible`` is false then).
    """
    request = context.get("request")
    user: AnyUser | None = getattr(request, "user", None)
    if user is None or not user.is_active or not user.is_staff:
        return {"visible": False}
    waiting = count_waiting_gates(user)
    return {
        "visible": inbox_visible(user, waiting),
        "waiting": waiting,
        "inbox_url": reverse("admin:workflows_approvals"),
    }
