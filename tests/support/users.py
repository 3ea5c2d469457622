"""Users a test signs in or acts as: staff holding given permissions."""

from __future__ import annotations

from django.contrib.auth.models import Permission, User


def staff(username: str, *permissions: str, password: str = "pw") -> User:
    """A staff user (password ``pw`` unless told) holding the given permission codenames."""
    user = User.objects.create_user(username, password=password, is_staff=True)
    for codename in permissions:
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return User.objects.get(pk=user.pk)  # fresh: no cached permissions
