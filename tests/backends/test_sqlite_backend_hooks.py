"""The SQLite backend's write lock hangs on private hooks of Django's SQLite wrapper: a
Django without one of them fails system check ``workflows.E012`` instead of letting
writers silently skip the lock."""

from __future__ import annotations

import django
import pytest
from django.db.backends.sqlite3 import base as djangos

from workflows.backends.sqlite3.base import HOOKS, DatabaseWrapper, missing_hooks
from workflows.checks import check_sqlite_backend, sqlite_backend_problems


def test_the_installed_djangos_sqlite_wrapper_has_every_hook_the_backend_overrides():
    """Silent on every Django the suite runs on (the CI matrix)."""
    assert missing_hooks() == ()
    assert sqlite_backend_problems("default", missing_hooks()) == []
    assert check_sqlite_backend() == []


def test_the_hooks_are_the_private_methods_of_djangos_the_backend_overrides():
    """A new override of a private method joins ``HOOKS``, so the check covers it too."""
    overridden = {
        name
        for name in vars(DatabaseWrapper)
        if name.startswith("_")
        and not name.startswith("__")
        and hasattr(djangos.DatabaseWrapper, name)
    }
    assert overridden == set(HOOKS)


@pytest.mark.parametrize("hook", HOOKS)
def test_a_django_without_a_hook_the_backend_overrides_fails_the_system_check(hook):
    def method(self):
        return None

    stand_in = type(
        f"DjangoSQLiteWrapperWithout{hook}", (), {name: method for name in HOOKS if name != hook}
    )
    assert missing_hooks(stand_in) == (hook,)
    (error,) = sqlite_backend_problems("default", missing_hooks(stand_in))
    assert error.id == "workflows.E012"
    assert hook in error.msg and f"Django {django.get_version()}" in error.msg
    assert "5.2 or 6.1" in error.hint
