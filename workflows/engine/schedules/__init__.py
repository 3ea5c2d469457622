"""Schedules fired: each slot decided once, under a compare-and-set of its schedule, and
started as one run whose idempotency key names the schedule and the slot.

- :mod:`.history`: the schedule's events (``schedule.fired``, ``.skipped``, ``.missed``, ...).
- :mod:`.slot_runs`: the run of one slot (or of a trigger), created at most once.
- :mod:`.firing`: one schedule's due slots decided by its overlap policy and catch-up
  window, and the slots it buffered started once its earlier runs end.
- :mod:`.manual`: a trigger and a backfill, outside the slot sequence.
"""
