"""Public verbs: what the admin, the API, commands and user code call.

Each verb validates its input and delegates to one engine transition; none writes
workflow state itself.
"""

from __future__ import annotations

from workflows.engine import start_run

__all__ = ["start_run"]
