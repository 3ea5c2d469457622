"""Unique business keys: which insert or update the database refused for one.

A workflow with ``unique_business_key`` lets one live run hold a key at a time. The
rule is the partial unique index ``workflows_run_unique_live_business_key`` (see
``Run.Meta``), not a read before the write: of two starts, two setters, or a retry that
brings back a run whose key another run took meanwhile, the database lets one through
and refuses the other, on SQLite and PostgreSQL alike. This module recognises that
refusal in the database's own words and names it as :class:`BusinessKeyInUse`.
"""

from __future__ import annotations

from django.db import IntegrityError

from workflows.errors import BusinessKeyInUse

__all__ = ["INDEX", "key_refusal"]

INDEX = "workflows_run_unique_live_business_key"
# How SQLite names the index it refused: by its columns (PostgreSQL names the index).
_SQLITE_COLUMNS = "workflows_run.workflow_name, workflows_run.business_key"


def key_refusal(
    error: IntegrityError, *, key: str = "", workflow: str = ""
) -> BusinessKeyInUse | None:
    """The :class:`BusinessKeyInUse` that ``error`` is, or ``None`` for another refusal.

    ``key`` and ``workflow``, when the caller knows them, go into the message.
    """
    said = str(error)
    if INDEX not in said and _SQLITE_COLUMNS not in said:
        return None
    what = f"business key {key!r}" if key else "the business key"
    of = f" of {workflow!r}" if workflow else ""
    return BusinessKeyInUse(
        f"{what} is held by another live run{of}, whose business keys are unique "
        "(Workflow.unique_business_key): one live run per key",
        **({"business_key": key} if key else {}),
        **({"workflow": workflow} if workflow else {}),
    )
