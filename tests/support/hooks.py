"""What the hooks (Django signals of ``workflows.hooks``) sent while a test ran."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from django.dispatch import Signal


@contextmanager
def receiving(names: Mapping[Signal, str]) -> Iterator[list[dict[str, Any]]]:
    """Every call of the given hooks while the block runs, in order: ``{"hook": name,
    "sender": sender, **arguments}``, each hook named by ``names``; disconnected after."""
    calls: list[dict[str, Any]] = []

    def receiver_of(name: str) -> Callable[..., None]:
        def receive(sender: Any, signal: Signal, **arguments: Any) -> None:
            calls.append({"hook": name, "sender": sender, **arguments})

        return receive

    connected = [(signal, receiver_of(name)) for signal, name in names.items()]
    for signal, receive in connected:
        signal.connect(receive)
    try:
        yield calls
    finally:
        for signal, receive in connected:
            signal.disconnect(receive)
