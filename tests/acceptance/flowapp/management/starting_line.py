"""Racing processes start together: each says it is ready (``GO_FILE.<pid>.ready``, or a
file of its own) and waits for a go file, which the test creates once every racer is
ready."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError


def add_go_file_argument(parser: Any) -> None:
    parser.add_argument(
        "--go-file", help="create GO_FILE.<pid>.ready, then wait for GO_FILE to start"
    )


def wait_for_file(
    go_file: str | Path, *, give_up_at: float, deadline: float, every: float = 0.01
) -> None:
    """Wait until ``go_file`` exists (looked at every ``every`` seconds); fail at
    ``give_up_at`` (``time.monotonic()``), ``deadline`` seconds after the start."""
    while not Path(go_file).exists():
        if time.monotonic() > give_up_at:
            raise CommandError(f"{go_file} did not appear within {deadline} s")
        time.sleep(every)


def wait_for_go(go_file: str, *, give_up_at: float, deadline: float) -> None:
    """Create ``GO_FILE.<pid>.ready``, then :func:`wait_for_file` ``go_file``."""
    Path(f"{go_file}.{os.getpid()}.ready").touch()
    wait_for_file(go_file, give_up_at=give_up_at, deadline=deadline)
