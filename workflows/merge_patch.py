"""JSON merge patch (RFC 7386): how ``ctx.summary(patch)`` changes a step's summary and
``ctx.set_variables(patch)`` a run's variables. A pure function of JSON values, so it
lives with the vocabulary every layer speaks (the context applies a handler's own
patches to what it reads, the engine applies them as it commits)."""

from __future__ import annotations

from typing import Any


def merge_patch(target: Any, patch: Any) -> Any:
    """Return ``target`` with ``patch`` applied, as RFC 7386 §2 defines it; neither is changed.

    An object patch merges member by member: ``null`` removes a member, an object merges
    into the member recursively (a member that is not an object is first replaced by
    ``{}``), anything else replaces it. A patch that is not an object replaces the
    target whole. Arrays are values: a patch never merges into one.
    """
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for name, value in patch.items():
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = merge_patch(merged.get(name), value)
    return merged
