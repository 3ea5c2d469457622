"""Stable hashes of JSON values, for idempotent starts and signals."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from workflows.errors import InvalidInput


def fingerprint(value: Any) -> str:
    """SHA-256 of the canonical JSON of ``value``; non-JSON values are invalid input."""
    try:
        canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"not JSON-serialisable: {exc}") from exc
    return hashlib.sha256(canonical.encode()).hexdigest()
