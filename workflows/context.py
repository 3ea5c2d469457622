"""The context handed to handlers and conditions: the run's input and earlier outputs."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any, Protocol
from uuid import UUID

from workflows.errors import PermanentError, WorkflowError
from workflows.tags import count_problem, patch_problem, patched as patched_tags
from workflows.validation import check_text
from workflows.variables import object_problem, patched, size_problem

# The longest signal name the database stores (``Signal.name``).
SIGNAL_NAME_LIMIT = 200


@dataclass(frozen=True, init=False)
class Await:
    """Returned by a task's handler to end its attempt and wait for a signal, mid-step.

    ``Await("mapping", timeout=timedelta(hours=4))``, or several names (a list or
    tuple: the first to arrive wins). The attempt ends without using one up; the step
    waits, and the handler runs again, as its next attempt, when a matching signal
    arrives (``ctx.resumed == {"signal": name, "payload": ...}``) or the timeout
    passes (``{"timed_out": True}``). A signal sent before the await is kept and
    consumed when the handler awaits. Each name must be declared by the task
    (``Task(handler, awaits=[...])``), so that ``send_signal`` accepts it beforehand.

    Checked when made, so a bad value fails the attempt for good (a
    :class:`~workflows.errors.PermanentError` naming the problem): names are non-empty
    strings of at most 200 characters, at least one of them; ``timeout`` a positive
    ``timedelta`` or ``None`` (wait for as long as it takes).
    """

    signals: tuple[str, ...]
    timeout: timedelta | None

    def __init__(
        self, signal: str | list[str] | tuple[str, ...], *, timeout: timedelta | None = None
    ) -> None:
        names = (signal,) if isinstance(signal, str) else signal
        if not isinstance(names, list | tuple) or not names:
            raise PermanentError(f"Await needs a signal name or a list of them, got {signal!r}")
        for name in names:
            if not isinstance(name, str) or not name:
                raise PermanentError(
                    f"Await: a signal name must be a non-empty string, got {name!r}"
                )
            check_text(
                name, field="Await signal name", limit=SIGNAL_NAME_LIMIT, error=PermanentError
            )
        if timeout is not None and (not isinstance(timeout, timedelta) or timeout <= timedelta(0)):
            raise PermanentError(
                f"Await: timeout must be a positive timedelta or None, got {timeout!r}"
            )
        object.__setattr__(self, "signals", tuple(dict.fromkeys(names)))
        object.__setattr__(self, "timeout", timeout)


@dataclass(frozen=True)
class StepResult:
    """What a handler may read of another step of the same run.

    In a loop, ``output`` is the output of the step's latest completed iteration (the
    current one once it completed, else the one before), ``iteration`` the iteration
    the step is in, and ``iterations`` the output of every finished iteration, oldest
    first (``None`` for one that was skipped or failed).
    """

    name: str
    status: str
    output: Any
    iteration: int = 1
    iterations: tuple[Any, ...] = ()


class StepResults(Mapping[str, StepResult]):
    """Outputs of the run's steps, loaded from the database one step at a time on access.

    Lazy on purpose: a handler that reads nothing costs no query, so the price of a step
    does not grow with the size of its run. A step run more than once (a loop's
    iterations, a rerun) costs one query more, for its earlier iterations.
    """

    def __init__(self, run_id: UUID, names: tuple[str, ...]) -> None:
        self._run_id = run_id
        self._names = names
        self._loaded: dict[str, StepResult] = {}

    def __getitem__(self, name: str) -> StepResult:
        if name not in self._names:
            raise KeyError(f"no step named {name!r} in this workflow (steps: {self._names})")
        if name not in self._loaded:
            from workflows.models import Step

            row = Step.objects.filter(run_id=self._run_id, name=name).values(
                "id", "status", "output", "iteration", "generation"
            )
            found = row.first()
            if found is None:
                self._loaded[name] = StepResult(name, "pending", None)
            else:
                self._loaded[name] = _with_iterations(name, found)
        return self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def _with_iterations(name: str, row: Mapping[str, Any]) -> StepResult:
    """The result of a step row, with its earlier iterations when a loop ran it again.

    Only a step in its first generation surely has none: a poll in a loop's body starts
    again at iteration 1 in each round, with the polls of the rounds before archived."""
    status, output, iteration = row["status"], row["output"], row["iteration"]
    if row["generation"] == 0:
        return StepResult(name, status, output, 1, (output,) if status == "completed" else ())
    from workflows.models import StepIteration

    earlier = list(
        StepIteration.objects.filter(step_id=row["id"])
        .order_by("generation", "iteration")
        .values_list("status", "output")
    )
    finished = [out if done == "completed" else None for done, out in earlier]
    completed = [out for done, out in earlier if done == "completed"]
    if status == "completed":
        finished.append(output)
        completed.append(output)
    latest = completed[-1] if completed else None
    return StepResult(name, status, latest, iteration, tuple(finished))


@dataclass(frozen=True)
class UpstreamResult:
    """What a flow member may read of one of its upstream members: its run's status and
    output."""

    member: str
    status: str
    output: Any


class UpstreamResults(Mapping[str, UpstreamResult]):
    """The upstream members of this run's flow member, by name; empty outside a flow.

    Loaded with one query on first access, so a handler that reads none pays nothing.
    """

    def __init__(self, run_id: UUID) -> None:
        self._run_id = run_id
        self._loaded: dict[str, UpstreamResult] | None = None

    def _results(self) -> dict[str, UpstreamResult]:
        if self._loaded is None:
            from workflows.models import FlowEdge

            rows = (
                FlowEdge.objects.filter(downstream__run_id=self._run_id)
                .order_by("upstream_id")
                .values_list("upstream__name", "upstream__run__status", "upstream__run__output")
            )
            self._loaded = {name: UpstreamResult(name, status, out) for name, status, out in rows}
        return self._loaded

    def __getitem__(self, member: str) -> UpstreamResult:
        results = self._results()
        if member not in results:
            raise KeyError(
                f"no upstream member named {member!r} (upstream members: {sorted(results)})"
            )
        return results[member]

    def __iter__(self) -> Iterator[str]:
        return iter(self._results())

    def __len__(self) -> int:
        return len(self._results())


def read_run_variables(run_id: UUID) -> dict[str, Any]:
    """The run's committed variables (one query)."""
    from workflows.models import Run

    found = Run.objects.filter(pk=run_id).values_list("variables", flat=True).first()
    return found or {}


class RunVariables(Mapping[str, Any]):
    """The run's variables, read-only: ``ctx.variables["region"]``.

    What a handler reads: the values committed when it first reads one (one query, on
    first access, then kept for the attempt), with the attempt's own patches
    (``ctx.set_variables``) applied on top, so a handler reads its own writes. A value
    is handed out as a copy: changing it changes nothing; ``ctx.set_variables`` does.
    A parallel branch's commit after that first read is not seen by this attempt; the
    next step, loop round, retry or rerun reads afresh.
    """

    def __init__(self, run_id: UUID, patches: list[dict[str, Any]] | None = None) -> None:
        self._run_id = run_id
        # The attempt's own patches, in call order: the worker commits them with the
        # attempt's result (shared with its lease); None outside a running handler.
        self._patches = patches
        self._committed: dict[str, Any] | None = None

    def _current(self) -> dict[str, Any]:
        if self._committed is None:
            self._committed = read_run_variables(self._run_id)
        return patched(self._committed, self._patches or ())

    def apply(self, patch: dict[str, Any]) -> None:
        """Check ``patch`` and keep it for the attempt's commit (``ctx.set_variables``)."""
        if self._patches is None:
            raise WorkflowError("set_variables() is only available inside a running handler")
        problem = object_problem(patch, field="ctx.set_variables patch")
        if problem is not None:
            raise PermanentError(problem)
        kept = copy.deepcopy(patch)
        problem = size_problem(patched(self._current(), (kept,)), field="the run's variables")
        if problem is not None:
            raise PermanentError(f"ctx.set_variables refused: {problem}")
        self._patches.append(kept)

    def __getitem__(self, name: str) -> Any:
        return copy.deepcopy(self._current()[name])

    def __iter__(self) -> Iterator[str]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())

    def as_dict(self) -> dict[str, Any]:
        """A copy of every variable as this attempt sees them."""
        return copy.deepcopy(self._current())


def _no_heartbeat() -> None:
    raise WorkflowError("heartbeat() is only available inside a running handler")


def _no_cancel_check() -> bool:
    raise WorkflowError("cancel_requested is only available inside a running handler")


def _no_callback(timeout: timedelta) -> Any:
    raise WorkflowError("await_callback() is only available inside a task's handler")


def _no_usage(dimension: str, amount: int | float | Decimal) -> None:
    raise WorkflowError("report_usage() is only available inside a running handler")


class ReportsProgress(Protocol):
    """``ctx.progress(done, total=None, message="")``."""

    def __call__(self, done: float, total: float | None = None, message: str = "") -> None: ...


class Logs(Protocol):
    """``ctx.log(text, stream="stdout")``."""

    def __call__(self, text: str, stream: str = "stdout") -> None: ...


class PatchesSummary(Protocol):
    """``ctx.summary(patch)``."""

    def __call__(self, patch: dict[str, Any]) -> None: ...


def _no_progress(done: float, total: float | None = None, message: str = "") -> None:
    raise WorkflowError("progress() is only available inside a running task's handler")


def _no_log(text: str, stream: str = "stdout") -> None:
    raise WorkflowError("log() is only available inside a running task's handler")


def _no_summary(patch: dict[str, Any]) -> None:
    raise WorkflowError("summary() is only available inside a running task's handler")


class Context:
    """Everything a handler (or a ``when=`` condition) may know about its run.

    ``idempotency_key`` is stable across every attempt of one step, so a handler can pass
    it to an external system to make a retried side effect happen once.
    """

    def __init__(
        self,
        *,
        run_id: UUID,
        input: dict[str, Any],
        step_names: tuple[str, ...],
        step_name: str = "",
        attempt: int = 0,
        iteration: int = 1,
        idempotency_key: str = "",
        item: Any = None,
        compensated_output: Any = None,
        heartbeat: Callable[[], None] = _no_heartbeat,
        await_callback: Callable[[timedelta], Any] = _no_callback,
        report_usage: Callable[[str, int | float | Decimal], None] = _no_usage,
        cancel_requested: Callable[[], bool] = _no_cancel_check,
        progress: ReportsProgress = _no_progress,
        log: Logs = _no_log,
        summary: PatchesSummary = _no_summary,
        read_resumed: Callable[[], dict[str, Any] | None] | None = None,
        variable_patches: list[dict[str, Any]] | None = None,
        tag_patches: list[dict[str, str | None]] | None = None,
    ) -> None:
        self.run_id = run_id
        """The run's id."""
        self.input = input
        """The run's input, as given to ``start_run``."""
        # Made on first access (steps, upstream, variables): most handlers read none.
        self._step_names = step_names
        self._steps: StepResults | None = None
        self._upstream: UpstreamResults | None = None
        self._variable_patches = variable_patches
        self._variables: RunVariables | None = None
        self.step_name = step_name
        """The name of the step this handler runs ("" in a ``when=`` condition)."""
        self.attempt = attempt
        """This attempt's number, from 1; it counts on across a step's rounds (a rerun,
        a retry, a loop's next iteration), so it never repeats within one step."""
        self.iteration = iteration
        """The iteration of this step a loop is running, 1-based (1 outside loops): in a
        ``Loop`` body, the body's round; in a polling task, the poll's number; in a
        compensation, the iteration whose work it undoes; in a loop's ``while_``, the
        round that just ended."""
        self.idempotency_key = idempotency_key or f"{run_id}/{step_name}"
        """Stable across every attempt of this step (new for a rerun's or a loop's next
        round): pass it to external systems so a retried side effect happens once."""
        self.item = item
        """The fan-out item this handler works on (``None`` outside fan-out items)."""
        self.compensated_output = compensated_output
        """In a compensation handler: the output of the work being undone."""
        # The attempt's own ``set_tags`` patches (shared with its lease; None outside a
        # running handler), and the run's committed tags once read (``ctx.tags``).
        self._tag_patches = tag_patches
        self._committed_tags: dict[str, str] | None = None
        self._heartbeat = heartbeat
        self._await_callback = await_callback
        self._report_usage = report_usage
        self._cancel_requested = cancel_requested
        self._read_resumed = read_resumed
        self._resumed: dict[str, Any] | None = None
        # Attributes, not forwarding methods: a handler may call them on every turn of a
        # tight loop, and a forwarding call doubled their cost (docs/benchmarks.md).
        self.progress: ReportsProgress = progress
        """Report this attempt's progress: ``done`` of ``total`` (finite numbers of 0 or
        more; ``total`` may be unknown), with a short ``message``. The last value wins:
        calls are kept in memory and written at most every ``PROGRESS_INTERVAL`` (and
        at a heartbeat and the attempt's end), so a tight loop may call it on every
        turn. Shown on the step as ``progress_done``, ``progress_total``,
        ``progress_message``; in a fan-out item's or a compensation's handler, on the
        item's or compensation's row, fenced the same way. A rerun, a retry or a loop's
        next iteration starts the step's next round with no progress (the ended round
        is kept as a ``StepRound``). Raises ``LeaseLost`` once a write found the
        attempt's lease lost, and writes nothing more."""
        self.log: Logs = log
        """Append ``text`` to this attempt's log as one frame of ``stream`` (``stdout``,
        ``stderr`` or ``event``). Frames are numbered per step, on across attempts
        (``workflows.frames(step, after=seq)`` reads them), written in batches, and
        bounded per attempt (``FRAMES_PER_ATTEMPT``, ``FRAME_BYTES_PER_ATTEMPT``): past
        the bound the oldest are dropped and counted in ``frames_dropped``. A new round
        of the step starts with none (``workflows.frames(step, round=n)`` reads an
        ended round's). An item's or a compensation's frames are kept on its row
        (``log``, its newest frames). Fenced as ``progress`` is."""
        self.summary: PatchesSummary = summary
        """Change the step's summary document with ``patch``, a JSON merge patch (RFC
        7386) given as a dict: members set, ``None`` removes one, dicts merge
        recursively. Copied at the call, applied at the next flush in call order;
        ``summary_version`` counts the patches. A new round of the step starts from an
        empty summary. Fenced as ``progress`` is."""

    @property
    def steps(self) -> StepResults:
        """The run's steps by name: ``ctx.steps["reserve"].output`` (a
        :class:`StepResult`), each loaded on first access."""
        if self._steps is None:
            self._steps = StepResults(self.run_id, self._step_names)
        return self._steps

    @steps.setter
    def steps(self, results: StepResults) -> None:
        self._steps = results

    @property
    def upstream(self) -> UpstreamResults:
        """A flow member's upstream members by name: ``ctx.upstream["build"].output`` (an
        :class:`UpstreamResult`); empty outside a flow."""
        if self._upstream is None:
            self._upstream = UpstreamResults(self.run_id)
        return self._upstream

    @upstream.setter
    def upstream(self, results: UpstreamResults) -> None:
        self._upstream = results

    @property
    def variables(self) -> RunVariables:
        """The run's variables, read-only (a :class:`RunVariables`): the values committed
        when the handler first reads one, with this attempt's own ``set_variables``
        patches applied. In a ``when=`` condition, the values committed so far."""
        if self._variables is None:
            self._variables = RunVariables(self.run_id, self._variable_patches)
        return self._variables

    def heartbeat(self) -> None:
        """Extend this attempt's lease.

        Raises ``LeaseLost`` when the attempt no longer holds it (it expired and another
        worker took the work, or an operator revoked it): stop, the work is not yours
        any more. Raises ``RunCancelled`` (a ``LeaseLost``) once the run is cancelling,
        cancelled, terminated or past its deadline: stop, the attempt is recorded as
        failed with class ``cancelled`` and not retried. Costs two statements.
        """
        self._heartbeat()

    @property
    def cancel_requested(self) -> bool:
        """Whether the run asks this attempt to stop: it is cancelling, cancelled,
        terminated or past its deadline (for a compensation: terminated only, since
        compensations are what a cancelled run runs next).

        Read from the database on every access (one small query, never cached), so a
        handler may poll it in its loop and stop at a good place, e.g. by raising
        ``workflows.RunCancelled``; ``heartbeat()`` raises that for you.
        """
        return self._cancel_requested()

    @property
    def resumed(self) -> dict[str, Any] | None:
        """How the step's last :class:`Await` ended: ``{"signal": name, "payload": ...}``
        or ``{"timed_out": True}``; ``None`` when its handler never awaited (a first run).

        Read from the step's row on first access (one small query), then kept: a handler
        that never looks at it pays nothing. A retried attempt after a resume sees the
        same value: the signal it consumed is not sent again.
        """
        if self._read_resumed is not None:
            self._resumed, self._read_resumed = self._read_resumed(), None
        return self._resumed

    def set_variables(self, patch: dict[str, Any]) -> None:
        """Change the run's variables with ``patch``, a JSON merge patch (RFC 7386) given
        as a dict: members set, ``None`` removes one, dicts merge recursively, lists
        are replaced whole.

        Fenced by the attempt like its result and committed with it, in the same
        transaction: an attempt that fails, times out, is revoked or loses its lease
        writes no variables, and a retry starts from the committed values. Several calls
        apply in order; ``ctx.variables`` shows them at once. Each commit is a
        ``run.variables_set`` event naming the step and attempt, with the patches.
        Two parallel branches writing one key: the later commit wins.

        Raises :class:`~workflows.errors.PermanentError` (the attempt fails for good when
        the handler lets it through), naming the rule, for a patch that is not a JSON
        object of storable JSON, or that would take the variables past
        ``WORKFLOWS["MAX_VARIABLES_BYTES"]``; the commit checks the size again against
        the values committed by then.
        """
        self.variables.apply(patch)

    @property
    def tags(self) -> dict[str, str]:
        """The run's tags, a copy: those committed when the handler first reads them (one
        query), with this attempt's own ``set_tags`` patches applied."""
        if self._committed_tags is None:
            from workflows.models import Run

            found = Run.objects.filter(pk=self.run_id).values_list("tags", flat=True).first()
            self._committed_tags = found or {}
        return patched_tags(self._committed_tags, self._tag_patches or ())

    def set_tags(self, patch: dict[str, str | None]) -> None:
        """Change the run's tags with ``patch``: a key set to a string sets that tag, to
        ``None`` removes it, the other tags stay (docs/guide/tags.md).

        Fenced by the attempt like :meth:`set_variables` and committed with its result,
        in the same transaction: an attempt that fails, times out, is revoked or loses its
        lease writes no tags, and a retry starts from the committed ones. Several calls
        apply in order; ``ctx.tags`` shows them at once. Each commit is a
        ``run.tags_set`` event naming the step and attempt, with the patches.

        Raises :class:`~workflows.errors.PermanentError` naming the tag (the attempt fails
        for good when the handler lets it through) for a patch that is not a dict, a key
        not matching ``^[a-z][a-z0-9_.-]{0,63}$``, a value that is neither ``None`` nor a
        string of at most 255 characters without NUL, or a result of more than 32 tags;
        the commit checks the count again against the tags committed by then.
        """
        if self._tag_patches is None:
            raise WorkflowError("set_tags() is only available inside a running handler")
        refused = patch_problem(patch, removals=True)
        if refused is not None:
            raise PermanentError(f"ctx.set_tags refused: {refused[0]}")
        kept = dict(patch)
        problem = count_problem(patched_tags(self.tags, (kept,)), field="the run's tags")
        if problem is not None:
            raise PermanentError(f"ctx.set_tags refused: {problem}")
        self._tag_patches.append(kept)

    def await_callback(self, timeout: timedelta) -> Any:
        """Return this (with its ``.token``) to park the step until a callback resolves it.

        Hand ``.token`` to the external system first; it calls
        ``workflows.complete_callback(token, output)`` or ``fail_callback(token, error)``.
        """
        return self._await_callback(timeout)

    def report_usage(self, dimension: str, amount: int | float | Decimal) -> None:
        """Count ``amount`` (a number >= 0: tokens, cents, calls) of ``dimension`` against
        the budgets of this run's workflow (``Workflow.budgets`` and those set at run
        time), at once and for good: usage stays recorded even if this attempt then fails.

        ``dimension`` must be one a budget of the workflow counts (declared, or set at
        run time with ``workflows.create_budget``): anything else (and an amount that is
        not a finite number >= 0) raises ``ValueError`` naming what is wrong, and nothing
        is recorded. Reaching a limit never interrupts the
        running handler; it holds (or fails) the run's next steps.
        """
        self._report_usage(dimension, amount)
