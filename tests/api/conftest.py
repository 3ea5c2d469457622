"""Clients of the HTTP API, one per role of the permission matrix."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from django.contrib.auth.models import Permission, User
from django.core.cache import cache
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.api.sample import Sample, populate

ROLE_PERMISSIONS = {
    "anonymous": None,
    "nobody": [],
    "viewer": ["view_run"],
    "starter": ["view_run", "start_run"],
    "operator": ["view_run", "operate_run"],
    "manager": ["view_run", "operate_run", "manage_consumers"],
}


def user_with(username: str, codenames: list[str]) -> User:
    user = User.objects.create_user(username, password="pw")
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return user


@pytest.fixture
def api() -> Callable[[str], APIClient]:
    """``api("viewer")``: a client authenticated by token as a user of that role."""

    clients: dict[str, APIClient] = {}

    def client_for(role: str) -> APIClient:
        if role not in clients:
            client = APIClient()
            codenames = ROLE_PERMISSIONS[role]
            if codenames is not None:
                token = Token.objects.create(user=user_with(f"{role}-user", codenames))
                client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
            clients[role] = client
        return clients[role]

    return client_for


@pytest.fixture
def fresh_throttle() -> Iterator[None]:
    """Throttle counts live in the cache: a test that requests this starts with none."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def sample(db: None) -> Sample:
    """A run with waiting gates, a fan-out, events and budgets (:mod:`tests.api.sample`)."""
    return populate()
