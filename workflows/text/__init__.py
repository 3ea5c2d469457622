"""How the app words time and ids for people, once for every surface.

The admin, the API's sentences, the hold table (:mod:`workflows.holds`) and the
operator commands all say a span of time with :func:`duration`, a moment relative to
now with :func:`relative` (``in 5 minutes``, ``40 seconds ago``, ``just now``), and a
run's or a flow's id in short with :func:`short_id`, and who holds a lease with
:func:`lease_holder` (``external worker go-1``). The vocabulary of layer 0: it
imports nothing of the app.
"""

from __future__ import annotations

from workflows.text.durations import duration, relative
from workflows.text.ids import SHORT_ID_CHARS, short_id
from workflows.text.owners import EXTERNAL_OWNER, lease_holder

__all__ = ["EXTERNAL_OWNER", "SHORT_ID_CHARS", "duration", "lease_holder", "relative", "short_id"]
