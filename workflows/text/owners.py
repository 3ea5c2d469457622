"""Who holds a lease, in words: every surface names a unit's worker the same way.

A lease's owner is stored as the worker's identity (``host:pid:thread`` for the
django-q2 cluster), or as ``external:<name>`` for a worker outside the process that
claimed the unit over ``claim_external`` (:mod:`workflows.workers.external`). People
read the second as "external worker go-1", not as a prefix and a colon.
"""

from __future__ import annotations

__all__ = ["EXTERNAL_OWNER", "lease_holder"]

# What the lease columns say of an external worker: its name after this prefix.
EXTERNAL_OWNER = "external:"


def lease_holder(owner: str) -> str:
    """``owner`` in words: ``external worker go-1`` for ``external:go-1``, ``worker
    host-1:7:7`` for an in-process worker, ``worker ?`` for none known."""
    if owner.startswith(EXTERNAL_OWNER):
        return f"external worker {owner.removeprefix(EXTERNAL_OWNER)}"
    return f"worker {owner or '?'}"
