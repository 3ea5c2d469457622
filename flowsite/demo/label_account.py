"""The demo's service account for its external label printer (``flowsite/label_printer.py``).

A user that does external work and nothing else: it holds ``workflows.do_external_work``
only, is no staff member, and has no password; it signs in to the API with a token
of a fixed, published value, as the admin signs in with admin / admin. A real
deployment creates its tokens at random and keeps them secret.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from rest_framework.authtoken.models import Token

from workflows.permissions import DO_EXTERNAL_WORK

USERNAME = "label-printer"
TOKEN = "demo-label-printer-token"


def ensure_label_printer() -> bool:
    """Create the account and its token unless they exist; whether it was created."""
    user, created = get_user_model().objects.get_or_create(username=USERNAME)
    if created:
        user.set_unusable_password()
        user.save()
        app_label, codename = DO_EXTERNAL_WORK.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    Token.objects.get_or_create(user=user, defaults={"key": TOKEN})
    return created
