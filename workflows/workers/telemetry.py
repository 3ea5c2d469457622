"""The worker's buffer for the telemetry of an attempt of a task step, a fan-out item or
a compensation (``ctx.progress``, ``ctx.log``,
``ctx.summary``): calls are checked and kept in memory, and written together by one
fenced flush (:func:`workflows.engine.telemetry.flush_telemetry`).

When a flush happens: when a call finds the last one (or the attempt's start) at least
``PROGRESS_INTERVAL`` ago, at ``ctx.heartbeat()`` (before the lease is extended), and
at the attempt's end, before its outcome is recorded, whether it succeeded or failed.
So progress is coalesced (the last value before a flush wins, at most one write per
interval) and log lines are written in batches: a loop calling ``ctx.progress`` ten
thousand times costs a clock read per call and a write per interval. An attempt that
never calls them has nothing pending and writes nothing.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import numbers
import re
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from workflows.conf import workflow_settings
from workflows.context import Context
from workflows.engine import Lease, heartbeat
from workflows.engine.telemetry import (
    FrameBudget,
    PendingTelemetry,
    Progress,
    flush_telemetry,
)
from workflows.errors import LeaseLost
from workflows.models import Step
from workflows.status import FrameStream
from workflows.validation import check_json

logger = logging.getLogger("workflows.runner")

_STREAMS = frozenset(FrameStream.values)
_MESSAGE_LENGTH = Step._meta.get_field("progress_message").max_length or 500
_REPLACEMENT = "\ufffd"
# The largest float: an int above it has no float value to store.
_LARGEST = sys.float_info.max
# Bound once: read on every call of a handler's loop.
_monotonic = time.monotonic
_wall_clock = time.time
_SURROGATE = re.compile("[\ud800-\udfff]")


class AttemptTelemetry:
    """The telemetry of one attempt of leased work (a task step, a fan-out item, a
    compensation), buffered between flushes.

    Once a flush found the lease lost, every later call raises that ``LeaseLost`` and
    writes nothing: the work belongs to another attempt now.
    """

    def __init__(
        self,
        lease: Lease,
        beat: Callable[[], None] | None = None,
        budget: FrameBudget | None = None,
        started: float | None = None,
    ) -> None:
        """``budget``: the frames the attempt has written so far, when not all of them
        were written through this object (an external worker's, one report a call);
        ``started``: when the attempt started (``time.monotonic()``), if before now: the
        first interval is counted from it."""
        self._lease = lease
        # What extends the lease after a flush: the unit's own heartbeat, or its batch's.
        self._beat = beat or partial(heartbeat, lease)
        self._interval = workflow_settings.PROGRESS_INTERVAL.total_seconds()
        self._budget = budget or FrameBudget(
            workflow_settings.FRAMES_PER_ATTEMPT, workflow_settings.FRAME_BYTES_PER_ATTEMPT
        )
        self._pending = PendingTelemetry()
        # The last progress as given (done, total, message checked); made a Progress of
        # floats at the flush, so that a call costs no conversion.
        self._progress: tuple[float, float | None, str] | None = None
        # The last message given, and as stored: a loop passes the same one on every
        # turn, and it is checked once.
        self._message_given = ""
        self._message = ""
        self._written_at = _monotonic() if started is None else started
        self._lost: LeaseLost | None = None
        # The progress last written: another one given since is pending. Compared, never
        # reset, so a call racing a flush from another thread is never lost.
        self._progress_written: tuple[float, float | None, str] | None = None
        # Held by a flush (and a heartbeat, which flushes first) and by the appends it
        # takes over: a handler may report from several threads, and two flushes with
        # one lease version would fence each other out as if the lease were lost.
        self._lock = threading.RLock()

    def progress(self, done: float, total: float | None = None, message: str = "") -> None:
        """Keep ``done`` of ``total`` with ``message`` as the attempt's progress (the last
        value before a flush is written). Numbers must be finite and 0 or more; a message
        longer than the column is cut.

        The common case (an int or float in range, the message of the previous call)
        takes a few comparisons: this runs on every turn of a handler's loop.
        """
        if message is not self._message_given:
            self._message = _checked_message(message)
            self._message_given = message
        if not ((done.__class__ is int or done.__class__ is float) and 0 <= done <= _LARGEST):
            done = _amount(done, "done")
        if total is not None and not (
            (total.__class__ is int or total.__class__ is float) and 0 <= total <= _LARGEST
        ):
            total = _amount(total, "total")
        self._progress = (done, total, self._message)
        if _monotonic() - self._written_at >= self._interval:
            self.flush()

    def log(self, text: str, stream: str = "stdout") -> None:
        """Append ``text`` as one frame of ``stream`` (stdout, stderr, event).

        A NUL character or a lone surrogate, which no database stores, is replaced by
        U+FFFD rather than refused: a log line is evidence, not data to validate.
        """
        if text.__class__ is not str:
            raise ValueError(f"log text must be a str, got {type(text).__name__}")
        if stream not in _STREAMS:
            raise ValueError(f"log stream must be one of {', '.join(FrameStream.values)}")
        if text.isascii() and "\x00" not in text:
            size = len(text)
        else:
            text = _storable(text)
            size = len(text.encode())
        with self._lock:
            self._pending.frames.append((stream, text, _wall_clock(), size))
        if _monotonic() - self._written_at >= self._interval:
            self.flush()

    def summary(self, patch: dict[str, Any]) -> None:
        """Apply ``patch`` (a JSON merge patch, RFC 7386, given as a dict) to the step's
        summary at the next flush; ``summary_version`` counts the patches applied."""
        if not isinstance(patch, dict):
            raise ValueError(
                f"summary patch must be a dict (a JSON object), got {type(patch).__name__}"
            )
        check_json(patch, field="summary patch", error=ValueError)
        patch = copy.deepcopy(patch)
        with self._lock:
            self._pending.patches.append(patch)
        if _monotonic() - self._written_at >= self._interval:
            self.flush()

    def heartbeat(self) -> None:
        """Flush, then extend the lease (:func:`workflows.engine.heartbeat`).

        A flush refused for a lost lease is left for the heartbeat to report: it finds
        the same fence broken, records ``lease.lost`` and raises ``LeaseLost``, or
        ``RunCancelled`` when the run asks its attempts to stop.
        """
        with self._lock:
            with contextlib.suppress(LeaseLost):
                self.flush()
            self._beat()

    def flush(self) -> None:
        """Write what is pending now (nothing pending: no statement); raises ``LeaseLost``."""
        with self._lock:
            if self._lost is not None:
                raise self._lost
            progress = self._progress
            if progress is not self._progress_written and progress is not None:
                done, total, message = progress
                self._pending.progress = Progress(
                    float(done), None if total is None else float(total), message
                )
            if not self._pending:
                return
            pending = self._pending.take()
            try:
                flush_telemetry(self._lease, pending, self._budget)
                self._progress_written = progress
            except LeaseLost as lost:
                self._lost = lost
                raise
            finally:
                # Once lost, every later call's clock check flushes, and the flush raises.
                self._written_at = -math.inf if self._lost is not None else _monotonic()

    def close(self) -> None:
        """The attempt's last flush, before its outcome is recorded; never raises.

        A lost lease is left for the outcome's own fenced write to find and record; a
        database that refuses the write is logged: telemetry never decides an outcome.
        """
        try:
            self.flush()
        except LeaseLost:
            pass
        except Exception:
            logger.exception("telemetry of %s not written", self._lease.label)


class DeferredTelemetry:
    """An attempt's telemetry, its :class:`AttemptTelemetry` made on the first call.

    Most handlers never call ``ctx.progress``, ``log`` or ``summary``: their attempt
    then builds no buffer, lock or frame budget, and its end flushes nothing. The first
    call makes the buffer, its interval counted from the attempt's start as if it had
    been there all along, and puts its methods on the handler's context
    (:meth:`serve`), so that a loop's later calls go straight to them.
    """

    __slots__ = ("_batch_beat", "_context", "_lease", "_started", "made")

    def __init__(self, lease: Lease, beat: Callable[[], None] | None = None) -> None:
        """``beat``: what extends the lease, when not the unit's own heartbeat (a batch's)."""
        self._lease = lease
        self._batch_beat = beat
        self._started = _monotonic()
        self._context: Context | None = None
        self.made: AttemptTelemetry | None = None

    def serve(self, context: Context) -> None:
        """Give ``context`` (the handler's) the buffer's own methods once it is made."""
        self._context = context

    def _make(self) -> AttemptTelemetry:
        with _MAKING:  # two threads of one handler reporting first share one buffer
            made = self.made
            if made is None:
                made = AttemptTelemetry(self._lease, self._beat, started=self._started)
                self.made = made
                context = self._context
                if context is not None:
                    context.progress, context.log = made.progress, made.log
                    context.summary = made.summary
        return made

    def _beat(self) -> None:
        if self._batch_beat is not None:
            self._batch_beat()
        else:
            heartbeat(self._lease)

    def progress(self, done: float, total: float | None = None, message: str = "") -> None:
        """:meth:`AttemptTelemetry.progress`."""
        (self.made or self._make()).progress(done, total, message)

    def log(self, text: str, stream: str = "stdout") -> None:
        """:meth:`AttemptTelemetry.log`."""
        (self.made or self._make()).log(text, stream)

    def summary(self, patch: dict[str, Any]) -> None:
        """:meth:`AttemptTelemetry.summary`."""
        (self.made or self._make()).summary(patch)

    def heartbeat(self) -> None:
        """:meth:`AttemptTelemetry.heartbeat` (the buffer's lock keeps a report's flush
        from another thread off the lease version the beat moves)."""
        (self.made or self._make()).heartbeat()

    def close(self) -> None:
        """:meth:`AttemptTelemetry.close`, when the attempt reported anything."""
        self._context = None  # the context holds this object's methods: no cycle left
        made = self.made
        if made is not None:
            made.close()


# Held while an attempt's buffer is made: rare (once per attempt that reports at all).
_MAKING = threading.Lock()


def _amount(value: Any, name: str) -> float:
    if value.__class__ is float or value.__class__ is int or _real(value):
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if math.isfinite(number) and number >= 0:
            return number
    raise ValueError(f"progress {name} must be a finite number of 0 or more, got {value!r}")


def _checked_message(message: Any) -> str:
    """A progress message as stored: a str, cut to the column, without NUL or surrogates."""
    if message.__class__ is not str:
        raise ValueError(f"progress message must be a str, got {type(message).__name__}")
    return _storable(message[:_MESSAGE_LENGTH])


def _real(value: Any) -> bool:
    """A number of another type than ``int`` or ``float`` (numpy's, ``Fraction``), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _storable(text: str) -> str:
    """``text`` without what no database stores (NUL, lone surrogates), as U+FFFD."""
    if "\x00" in text:
        text = text.replace("\x00", _REPLACEMENT)
    if not text.isascii():
        text = _SURROGATE.sub(_REPLACEMENT, text)
    return text
