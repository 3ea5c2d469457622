"""People in a real browser: staff users with a password to type, and the admin's login
form filled in as they would."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from tests.support.users import staff

PASSWORD = "correct-horse-battery"


def person(username: str, *permissions: str) -> User:
    """A staff user holding the given permission codenames, signing in with :data:`PASSWORD`."""
    return staff(username, *permissions, password=PASSWORD)


def sign_in(page: Any, username: str, next_path: str = "/admin/") -> None:
    """Sign ``username`` in through the admin's login form, then go on to ``next_path``."""
    page.goto(f"/admin/login/?next={next_path}")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_load_state()
