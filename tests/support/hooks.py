"""What the hooks (the Django signals of ``workflows.hooks``) sent while a test ran."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.dispatch import Signal

from workflows import hooks


@contextmanager
def receiving(*names: str) -> Iterator[list[dict[str, Any]]]:
    """Every call of the hooks ``names`` (attributes of ``workflows.hooks``) while the
    block runs, in order: ``{"hook": name, "sender": sender, **arguments}``."""
    calls: list[dict[str, Any]] = []

    def receiver_of(name: str) -> Callable[..., None]:
        def receive(sender: Any, signal: Signal, **arguments: Any) -> None:
            calls.append({"hook": name, "sender": sender, **arguments})

        return receive

    connected = [(getattr(hooks, name), receiver_of(name)) for name in names]
    for signal, receive in connected:
        signal.connect(receive)
    try:
        yield calls
    finally:
        for signal, receive in connected:
            signal.disconnect(receive)


def received_fixture(*names: str) -> Any:
    """A fixture ``received``: every call of the hooks ``names`` while its test runs
    (:func:`receiving`). A module assigns it: ``received = received_fixture(...)``."""

    @pytest.fixture
    def received() -> Iterator[list[dict[str, Any]]]:
        with receiving(*names) as calls:
            yield calls

    return received
