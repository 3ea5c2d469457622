"""Wake-ups on commit: a transition tells the parties waiting for it once it committed.

A *topic* names what happened: ``run:<run id>`` (an event of that run committed: a
terminal status, a gate waiting, ...), ``events`` (any event committed: hooks, webhooks,
consumers), ``timers`` (a timer is due now), ``webhooks`` (webhook deliveries to send
in this process), ``frames:<step id>`` (a running attempt wrote log frames or
progress). :func:`wake` is called inside the transition's
transaction and takes effect only when it commits; a rolled-back transition wakes
nobody. A waiter (the sweeper, a long poll) makes a :class:`Watch` of its topics, reads
the database, and calls ``Watch.wait``, which blocks until one of the topics is woken
since the watch was made, or the timeout passes.

A wake-up is a hint, never the record: every waiter re-reads the database when woken
and also on its timeout, so a lost wake-up delays work and never loses it.

Within a process the counters of :mod:`~workflows.engine.wakeups.local` do it; across
processes on PostgreSQL, ``NOTIFY`` and a listener thread
(:mod:`~workflows.engine.wakeups.postgresql`); on SQLite a waiter in another process
finds the work at its next backstop read. See "Wake-ups on commit" in
``docs/architecture.md``.
"""

from workflows.engine.wakeups.hub import (
    Watch,
    events_written,
    timer_armed,
    wait_for_wakeup,
    wake,
)
from workflows.engine.wakeups.local import woken

__all__ = ["Watch", "events_written", "timer_armed", "wait_for_wakeup", "wake", "woken"]
