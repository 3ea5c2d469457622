"""What the operator commands share between reading their options and calling a verb.

The user an operator acts as, JSON option values, and a verb's refusal turned into a
``CommandError``: kept here so that every command words these the same way.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.core.management.base import CommandError

from workflows.errors import WorkflowError


def json_value(text: str) -> Any:
    """argparse type of a JSON option: any JSON value, refused at parse time if malformed.

    ``NaN`` and ``Infinity`` are refused too: Python's parser accepts them, but they are
    not JSON and PostgreSQL would reject them when the value is stored.
    """

    def refuse_constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON value")

    try:
        return json.loads(text, parse_constant=refuse_constant)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from exc


def user_named(username: str | None) -> AbstractBaseUser | None:
    """Return the user called ``username`` (``None`` for no ``--user``), or refuse.

    Looked up by the user model's ``USERNAME_FIELD``, so a custom user model works too.
    """
    if username is None:
        return None
    user_model = get_user_model()
    try:
        return user_model._default_manager.get_by_natural_key(username)
    except user_model.DoesNotExist:
        raise CommandError(f"no user named {username!r}") from None


@contextmanager
def refusals_as_command_errors() -> Iterator[None]:
    """Turn a refused verb (a ``WorkflowError`` or ``PermissionDenied``) into a
    ``CommandError`` carrying its message, so the command exits non-zero naming the problem.

    Both are refusals decided before anything is written; any other exception is a bug
    and keeps its traceback.
    """
    try:
        yield
    except WorkflowError as exc:
        raise CommandError(exc.message) from exc
    except PermissionDenied as exc:
        raise CommandError(str(exc) or "permission denied") from exc
