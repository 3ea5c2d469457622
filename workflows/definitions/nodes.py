"""Node types of the workflow DSL: one class per kind of step.

A node is declared as a class attribute of a :class:`~workflows.Workflow`; the attribute
name becomes the step name. ``after=`` names upstream steps (default: the step declared
just before; ``after=[]`` makes a root), ``when=`` is a condition on the run context
evaluated when the step's upstreams are done (false: the step is skipped).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict, Unpack

from django.utils.module_loading import import_string

from workflows.conf import workflow_settings
from workflows.definitions.iterations import repeat_problems
from workflows.definitions.limits import (
    RateLimit,
    name_problems,
    priority_problems,
    rate_problems,
)
from workflows.definitions.retry import Retry
from workflows.status import NodeKind

if TYPE_CHECKING:
    from workflows.context import Context

Condition = Callable[["Context"], bool]
Handler = Callable[["Context"], Any]

_declaration_order = itertools.count()


class Node:
    """Base class of every step kind."""

    kind: ClassVar[str] = ""

    def __init__(
        self, *, after: Sequence[str] | str | None = None, when: Condition | None = None
    ) -> None:
        if isinstance(after, str):
            after = [after]
        self.after: list[str] | None = list(after) if after is not None else None
        self.when = when
        self.name = ""
        self.declaration_index = next(_declaration_order)

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def problems(self) -> list[str]:
        """Return what is wrong with this node's own arguments, one sentence each."""
        if self.when is not None and not callable(self.when):
            return [f"when= must be callable, got {self.when!r}"]
        return []

    def describe(self) -> dict[str, Any]:
        """Return the JSON shape of this node for a run's snapshot."""
        return {"kind": self.kind, "has_condition": self.when is not None}

    def step_columns(self) -> dict[str, Any]:
        """Columns a step of this node carries from the run's start (field → value).

        What must be known about a step before it is reached: a gate's rule of who may
        decide it, which a skip of a gate not yet waiting is checked against.
        """
        return {}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name or '?'}>"


def handler_path(handler: str | Handler) -> str:
    """Return the importable dotted path of ``handler`` (a path or a module-level function)."""
    if isinstance(handler, str):
        return handler
    module = getattr(handler, "__module__", None)
    qualname = getattr(handler, "__qualname__", "")
    if not module or "<" in qualname or "." in qualname:
        raise TypeError(
            f"handler {handler!r} is not a module-level function; "
            "pass a dotted path or a function defined at module level"
        )
    return f"{module}.{qualname}"


def timeout_problems(timeout: object) -> list[str]:
    """A node's optional ``timeout=`` must be a positive timedelta."""
    if timeout is None or (isinstance(timeout, timedelta) and timeout > timedelta(0)):
        return []
    return [f"timeout must be a positive timedelta, got {timeout!r}"]


def _resolvable(label: str, path: str) -> list[str]:
    try:
        target = import_string(path)
    except ImportError as exc:
        return [f"{label} {path!r} cannot be imported: {exc}"]
    return [] if callable(target) else [f"{label} {path!r} is not callable"]


class LeasedNode(Node):
    """A node whose work runs in workers as leased, retried, fenced attempts.

    ``compensate`` names a handler that undoes a completed attempt when the run later
    fails or is cancelled (Saga); it receives the original input and output.

    Routing and limits (``docs/guide/routing.md``): ``queue`` and ``requires`` say which
    workers may run it (default: the workflow's ``default_queue`` and
    ``default_requires``); ``priority`` orders it among ready work (default: the run's);
    ``concurrency_key(ctx)`` with ``max_concurrent`` (default 1) caps how many attempts
    with the same key run at once across all workers; ``rate_limit`` (``"10/s"``) caps
    how many start per period.

    ``transactional=True`` runs each handler (and compensation handler) of the node
    inside the database transaction that records its outcome: the handler's own ORM
    writes commit together with the completion, and roll back with it when the attempt
    fails or its lease was lost (see ``docs/guide/transactions.md``).
    """

    def __init__(
        self,
        handler: str | Handler | None,
        *,
        retry: Retry | None = None,
        timeout: timedelta | None = None,
        compensate: str | Handler | None = None,
        transactional: bool = False,
        queue: str | None = None,
        requires: Iterable[str] | None = None,
        priority: int | None = None,
        concurrency_key: Callable[[Context], str] | None = None,
        max_concurrent: int | None = None,
        rate_limit: str | None = None,
        after: Sequence[str] | str | None = None,
        when: Condition | None = None,
    ) -> None:
        super().__init__(after=after, when=when)
        self.handler = handler
        self.retry = retry
        self.timeout = timeout
        self.compensate = compensate
        self.transactional = transactional
        self.queue = queue
        self.requires = frozenset(requires) if requires is not None else None
        self.priority = priority
        self.concurrency_key = concurrency_key
        self.max_concurrent = max_concurrent
        if concurrency_key is not None and max_concurrent is None:
            self.max_concurrent = 1
        self.rate_limit = rate_limit

    @property
    def handler_path(self) -> str:
        return handler_path(self.handler) if self.handler is not None else ""

    @property
    def compensate_path(self) -> str:
        return handler_path(self.compensate) if self.compensate is not None else ""

    def resolve_handler(self) -> Handler:
        """Import and return the handler function."""
        return import_string(self.handler_path)

    @property
    def effective_retry(self) -> Retry:
        """The declared policy, or the project-wide default from ``WORKFLOWS`` settings."""
        if self.retry is not None:
            return self.retry
        return default_retry()

    @property
    def effective_timeout(self) -> timedelta:
        """How long one attempt's lease lasts before another worker may reclaim it."""
        return self.timeout if self.timeout is not None else workflow_settings.DEFAULT_STEP_TIMEOUT

    def problems(self) -> list[str]:
        found = super().problems()
        for label, value in (("handler", self.handler), ("compensate", self.compensate)):
            if value is None:
                continue
            try:
                found.extend(_resolvable(label, handler_path(value)))
            except TypeError as exc:
                found.append(f"{label}: {exc}")
        if self.retry is not None:
            if not isinstance(self.retry, Retry):
                found.append(f"retry= must be a Retry, got {self.retry!r}")
            else:
                found.extend(self.retry.problems())
        found.extend(timeout_problems(self.timeout))
        if not isinstance(self.transactional, bool):
            found.append(f"transactional must be True or False, got {self.transactional!r}")
        found.extend(self._routing_problems())
        return found

    def _routing_problems(self) -> list[str]:
        found = name_problems("queue", self.queue) if self.queue is not None else []
        for capability in sorted(self.requires or ()):
            found.extend(name_problems("each of requires=", capability))
        if self.priority is not None:
            found.extend(priority_problems(self.priority))
        if self.concurrency_key is not None and not callable(self.concurrency_key):
            found.append(f"concurrency_key= must be callable, got {self.concurrency_key!r}")
        if self.max_concurrent is not None:
            if self.concurrency_key is None:
                found.append("max_concurrent= needs a concurrency_key= to count by")
            limit = self.max_concurrent
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                found.append(f"max_concurrent must be an integer >= 1, got {limit!r}")
        found.extend(rate_problems(self.rate_limit))
        return found

    @property
    def parsed_rate_limit(self) -> RateLimit | None:
        return RateLimit.parse(self.rate_limit) if self.rate_limit is not None else None

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "handler": self.handler_path or None,
            "compensate": self.compensate_path or None,
            "retry": self.retry.describe() if self.retry is not None else None,
            "timeout": self.timeout.total_seconds() if self.timeout is not None else None,
            "transactional": self.transactional,
            "queue": self.queue,
            "requires": sorted(self.requires) if self.requires is not None else None,
            "priority": self.priority,
            "concurrency_key": self.concurrency_key is not None,
            "max_concurrent": self.max_concurrent,
            "rate_limit": self.rate_limit,
        }


class LeasedOptions(TypedDict, total=False):
    """The keyword arguments of :class:`LeasedNode`, which the leased kinds (``Task``,
    ``FanOut``) take beside their own and pass on unchanged."""

    retry: Retry | None
    timeout: timedelta | None
    compensate: str | Handler | None
    transactional: bool
    queue: str | None
    requires: Iterable[str] | None
    priority: int | None
    concurrency_key: Callable[[Context], str] | None
    max_concurrent: int | None
    rate_limit: str | None
    after: Sequence[str] | str | None
    when: Condition | None


def default_retry() -> Retry:
    """The retry policy of leased work that declares none (``WORKFLOWS`` settings)."""
    return Retry(
        max_attempts=workflow_settings.DEFAULT_MAX_ATTEMPTS,
        initial_interval=workflow_settings.DEFAULT_RETRY_INTERVAL,
        backoff=workflow_settings.DEFAULT_RETRY_BACKOFF,
        max_interval=workflow_settings.DEFAULT_RETRY_MAX_INTERVAL,
    )


class Task(LeasedNode):
    """Run a handler ``handler(ctx) -> JSON`` in a worker, leased and retried.

    A poll: with ``repeat_until(ctx)``, each completed iteration asks it (the iteration's
    output is ``ctx.steps[name].output``); false runs the task again after a durable
    sleep of ``every`` (a timer row, not a sleeping worker), as a new iteration with
    fresh attempts and a new idempotency key, at most ``max_iterations`` times; then
    ``on_exhausted="fail"`` fails the run with ``max_iterations_exceeded`` and
    ``"continue"`` lets the step complete. It is the short form of a one-step
    :class:`~workflows.definitions.loop.Loop` with a sleep in it.

    External work: ``Task(external=True, queue="payments", timeout=...)`` has no
    handler; workers outside the process claim it (``claim_external``, ``POST
    /api/work/claim/``), and ``timeout`` is the lease they get and must heartbeat
    within. Retries, failure classes, limits, budgets, deadlines, priority and revoke
    apply as to any task; a ``compensate`` handler is Python and runs in process.

    Awaits: ``awaits=["mapping"]`` names the signals the handler may await mid-step by
    returning ``workflows.Await(...)``; ``send_signal`` accepts them for the run (and
    keeps one sent early) as it does a ``WaitForSignal`` step's.
    """

    kind = NodeKind.TASK

    def __init__(
        self,
        handler: str | Handler | None = None,
        *,
        external: bool = False,
        awaits: Sequence[str] | str = (),
        repeat_until: Condition | None = None,
        every: timedelta | None = None,
        max_iterations: int | None = None,
        on_exhausted: str = "fail",
        **options: Unpack[LeasedOptions],
    ) -> None:
        super().__init__(handler, **options)
        self.external = external
        self.awaits: tuple[str, ...] = (awaits,) if isinstance(awaits, str) else tuple(awaits)
        self.repeat_until = repeat_until
        self.every = every
        self.max_iterations = max_iterations
        self.on_exhausted = on_exhausted

    def problems(self) -> list[str]:
        found = super().problems()
        found += repeat_problems(
            self.repeat_until, self.every, self.max_iterations, self.on_exhausted
        )
        found += [
            f"awaits needs non-empty signal names, got {name!r}"
            for name in self.awaits
            if not isinstance(name, str) or not name
        ]
        if not isinstance(self.external, bool):
            return [f"external must be True or False, got {self.external!r}", *found]
        if self.external:
            return [*self._external_problems(), *found]
        if self.handler is None:
            return ["Task needs a handler (or external=True: workers outside do it)", *found]
        return found

    def _external_problems(self) -> list[str]:
        """What an external task cannot have: its work runs outside this process."""
        found = []
        if self.handler is not None:
            found.append("an external Task has no handler: workers outside the process do it")
        if self.transactional:
            found.append(
                "an external Task cannot be transactional: its work commits outside the database"
            )
        if self.awaits:
            found.append("an external Task cannot await signals: it has no handler to resume")
        return found

    def describe(self) -> dict[str, Any]:
        described = {
            **super().describe(),
            **({"external": True} if self.external else {}),
            **({"awaits": list(self.awaits)} if self.awaits else {}),
        }
        if self.repeat_until is None:
            return described
        return {
            **described,
            "repeat_until": True,
            "every": self.every.total_seconds() if self.every is not None else 0,
            "max_iterations": self.max_iterations,
            "on_exhausted": self.on_exhausted,
        }


class Sleep(Node):
    """Wait for a duration, or until a moment computed from the context, behind a Timer."""

    kind = NodeKind.SLEEP

    def __init__(
        self,
        duration: timedelta | None = None,
        *,
        until: Callable[[Context], datetime] | None = None,
        after: Sequence[str] | str | None = None,
        when: Condition | None = None,
    ) -> None:
        super().__init__(after=after, when=when)
        self.duration = duration
        self.until = until

    def problems(self) -> list[str]:
        found = super().problems()
        if (self.duration is None) == (self.until is None):
            found.append("Sleep needs exactly one of a duration or until=")
        elif self.duration is not None and (
            not isinstance(self.duration, timedelta) or self.duration < timedelta(0)
        ):
            found.append(f"Sleep duration must be a non-negative timedelta, got {self.duration!r}")
        elif self.until is not None and not callable(self.until):
            found.append(f"Sleep until= must be callable, got {self.until!r}")
        return found

    def wake_at(self, ctx: Context, now: datetime) -> datetime:
        """Return when the sleep ends, given the moment it started."""
        if self.duration is not None:
            return now + self.duration
        assert self.until is not None, "problems() admits only a sleep with one of the two"
        moment = self.until(ctx)
        if not isinstance(moment, datetime) or moment.tzinfo is None:
            raise TypeError(f"Sleep until= must return an aware datetime, got {moment!r}")
        return moment

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "duration": self.duration.total_seconds() if self.duration is not None else None,
            "until": self.until is not None,
        }
