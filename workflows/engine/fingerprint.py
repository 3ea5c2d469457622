"""Stable hashes of JSON values, for idempotent starts and signals."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from workflows.validation import check_json


def fingerprint(value: Any, *, field: str = "input") -> str:
    """SHA-256 of the canonical JSON of ``value``; what cannot be stored is invalid input."""
    check_json(value, field=field)
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()
