"""Flowsite settings: one ``WORKFLOWS`` dict in Django settings, read with defaults.

Unknown keys raise :class:`~django.core.exceptions.ImproperlyConfigured`, so a typo
never silently falls back to a default.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed

DEFAULTS: dict[str, Any] = {
    # Where handler code runs: "inline" (ready steps wait for
    # ``workflows.testing.run_pending``) or a dotted path to an Executor class.
    "EXECUTOR": "inline",
    # How long one attempt of a step may run before its lease expires and another
    # worker may reclaim it; a Task's ``timeout=`` overrides it.
    "DEFAULT_STEP_TIMEOUT": timedelta(minutes=5),
    # Retry policy of a Task that declares none: (max_attempts, initial_interval,
    # backoff, max_interval).
    "DEFAULT_MAX_ATTEMPTS": 3,
    "DEFAULT_RETRY_INTERVAL": timedelta(seconds=1),
    "DEFAULT_RETRY_BACKOFF": 2.0,
    "DEFAULT_RETRY_MAX_INTERVAL": timedelta(minutes=5),
    # Module name imported from every installed app to find workflow definitions.
    "AUTODISCOVER_MODULE": "flows",
    # A worker that finishes a step claims the next one itself (no queue round trip)
    # until it has been busy this long; then the next step goes through the queue, so a
    # long chain never outlives the queue's task timeout.
    "CHAIN_BUDGET": timedelta(seconds=60),
    # Routing (docs/guide/routing.md): the queues a worker serves and the capabilities
    # it has, unless ``workflows_worker --queue/--capability`` say otherwise.
    "WORKER_QUEUES": ("default",),
    "WORKER_CAPABILITIES": (),
    # How often a running worker writes that it is alive (WorkerPresence.seen_at); one
    # not seen for three times this is gone, and explain says its queue has no worker.
    "WORKER_PRESENCE_INTERVAL": timedelta(seconds=10),
    # Rate limits per queue (docs/guide/limits.md): {"emails": "100/m"}, shared by
    # every worker of the queue, on top of any task's own ``rate_limit=``.
    "QUEUE_RATE_LIMITS": {},
    # A ready step nobody claimed for this long is sent to the executor again.
    "REDISPATCH_AFTER": timedelta(seconds=30),
    # The sweeper process (``workflows_sweeper``): how often it fires due timers and
    # how often it runs the recovery scanners.
    "TIMER_POLL_INTERVAL": timedelta(milliseconds=200),
    "RECOVERY_INTERVAL": timedelta(seconds=5),
    # ...and how often it runs ``repair_stuck_runs``, the one scanner whose cost grows
    # with the number of active runs (it checks each one), not with the work to do.
    "REPAIR_INTERVAL": timedelta(minutes=1),
    # Finished runs older than this are deleted by the purge scanner; None keeps them.
    "RETENTION": None,
    # The purge deletes in batches of whole runs, one transaction each, sized so that
    # each takes about this many milliseconds (workflows_purge --batch-ms overrides it)...
    "RETENTION_BATCH_MS": 100,
    # ...and one sweeper pass purges for at most about this long, then goes back to
    # timers and the other scanners; the next recovery pass goes on from the oldest run.
    "RETENTION_PASS_TIME": timedelta(milliseconds=500),
    # "database is locked" on SQLite is retried this many times with jittered backoff.
    "LOCKED_RETRY_ATTEMPTS": 10,
    "LOCKED_RETRY_BASE_DELAY": 0.01,
    # How long a signed approval link (``workflows.approval_link``) stays valid: long
    # enough for a mail read after a weekend, short enough that an old mail is harmless.
    "APPROVAL_LINK_MAX_AGE": timedelta(days=3),
    # The longest a signal token (``workflows.signal_token``) may live: a longer
    # ``expires_in`` is refused when the token is made, and a token issued longer ago
    # than this is refused when it is used, so lowering it shortens every token out there.
    "SIGNAL_TOKEN_MAX_AGE": timedelta(days=90),
    # ``explain`` and ``runs_needing_attention``: a scheduled timer this long past its
    # due time is "overdue" (the sweeper fires timers within a fraction of a second, the
    # fallback schedule within about a minute)...
    "ATTENTION_OVERDUE_GRACE": timedelta(minutes=1),
    # ...and ready work nobody claimed for this long is "undispatched". None means
    # REDISPATCH_AFTER + 30 s: the redispatch scanner has had its chance to re-send it.
    "ATTENTION_UNDISPATCHED_GRACE": None,
    # The HTTP API refuses JSON bodies larger than this (413 payload_too_large).
    "API_MAX_BODY_BYTES": 1024 * 1024,
    # Long polls (``?wait=S``) one user may hold at once in one server process; one more
    # is a 429 too_many_waits. Each holds a thread of a threaded server while it waits.
    "LONG_POLLS_PER_USER": 8,
    # The callback endpoints, authorised by their token alone, are throttled per client
    # address (DRF rate syntax).
    "API_CALLBACK_RATE": "600/min",
    # The external work endpoints (``/api/work/``) are throttled per worker: per user and
    # worker name (DRF rate syntax; None: no limit).
    "API_WORKER_RATE": "600/min",
    # The Prometheus endpoint (``workflows.metrics``): off (404) unless enabled; a
    # scraper authenticates with this bearer token (None: staff logins only)...
    "METRICS_ENABLED": False,
    "METRICS_TOKEN": None,
    # ...and the histograms count only what finished within this window, so a scrape
    # stays cheap on a long history.
    "METRICS_WINDOW": timedelta(hours=1),
    # A running step that reported no progress (``ctx.progress``) for this long since
    # its last report, or since it started, counts as stale in the metrics.
    "PROGRESS_STALE_AFTER": timedelta(minutes=5),
    # Live telemetry of a running task step (``ctx.progress``, ``ctx.log``,
    # ``ctx.summary``): the worker writes it at most this often (and at a heartbeat and
    # the attempt's end), so the last progress wins and log lines go in batches...
    "PROGRESS_INTERVAL": timedelta(milliseconds=250),
    # ...and keeps at most this many log frames, and bytes of their text, per attempt,
    # dropping the oldest (counted in the step's ``frames_dropped``).
    "FRAMES_PER_ATTEMPT": 10_000,
    "FRAME_BYTES_PER_ATTEMPT": 1024 * 1024,
    # Run variables (``ctx.set_variables``, ``start_run(variables=...)``): the most bytes
    # of compact JSON a run's variables may take; a start or a patch beyond it is refused.
    "MAX_VARIABLES_BYTES": 64 * 1024,
    # Traces (``workflows.tracing``, docs/operations/traces.md): spans are made when the
    # OpenTelemetry API is installed and the project set up its SDK; False makes none
    # even then...
    "TRACING": True,
    # ...and the run page links a run's trace id through this template, e.g.
    # "https://tempo.example.com/trace/{trace_id}" (None: the id is shown, not linked).
    "TRACE_URL": None,
    # Webhooks (``workflows.webhooks``): how long one POST may take (connect, send, each
    # read), and the waits before each retry of a delivery that failed; after the last
    # one it has failed for good. Standard Webhooks' suggested schedule.
    "WEBHOOK_TIMEOUT": timedelta(seconds=10),
    "WEBHOOK_RETRY_DELAYS": (
        timedelta(seconds=5),
        timedelta(minutes=5),
        timedelta(minutes=30),
        timedelta(hours=2),
        timedelta(hours=5),
        timedelta(hours=10),
    ),
}

# Settings that must hold a timedelta of zero or more.
_GRACES = ("ATTENTION_OVERDUE_GRACE", "ATTENTION_UNDISPATCHED_GRACE")
# Settings that must hold a timedelta of more than zero.
_POSITIVE = (
    "APPROVAL_LINK_MAX_AGE",
    "SIGNAL_TOKEN_MAX_AGE",
    "METRICS_WINDOW",
    "PROGRESS_INTERVAL",
    "PROGRESS_STALE_AFTER",
    "RETENTION_PASS_TIME",
    "WEBHOOK_TIMEOUT",
    "WORKER_PRESENCE_INTERVAL",
)
# Settings that must hold a whole number of one or more.
_COUNTS = (
    "FRAMES_PER_ATTEMPT",
    "FRAME_BYTES_PER_ATTEMPT",
    "LONG_POLLS_PER_USER",
    "MAX_VARIABLES_BYTES",
    "RETENTION_BATCH_MS",
)
# What ATTENTION_UNDISPATCHED_GRACE adds to REDISPATCH_AFTER when it is not set.
UNDISPATCHED_MARGIN = timedelta(seconds=30)


def _check_routing(merged: dict[str, Any]) -> None:
    """Queue and capability names, and the queues' rate limits, must be valid."""
    from workflows.definitions.limits import name_problems, rate_problems

    for setting, label in (("WORKER_QUEUES", "queue"), ("WORKER_CAPABILITIES", "capability")):
        names = merged[setting]
        if isinstance(names, str) or not isinstance(names, list | tuple | set | frozenset):
            raise ImproperlyConfigured(f"WORKFLOWS[{setting!r}] must be a list, got {names!r}.")
        for name in names:
            for problem in name_problems(label, name):
                raise ImproperlyConfigured(f"WORKFLOWS[{setting!r}]: {problem}.")
    limits = merged["QUEUE_RATE_LIMITS"]
    if not isinstance(limits, dict):
        raise ImproperlyConfigured(
            f"WORKFLOWS['QUEUE_RATE_LIMITS'] must be a dict of queue: rate, got {limits!r}."
        )
    for queue, rate in limits.items():
        for problem in [*name_problems("queue", queue), *rate_problems(rate)]:
            raise ImproperlyConfigured(f"WORKFLOWS['QUEUE_RATE_LIMITS']: {problem}.")


def _check_tracing(merged: dict[str, Any]) -> None:
    """``TRACING`` is a bool; ``TRACE_URL`` None or a URL template naming ``{trace_id}``."""
    if not isinstance(merged["TRACING"], bool):
        raise ImproperlyConfigured(
            f"WORKFLOWS['TRACING'] must be True or False, got {merged['TRACING']!r}."
        )
    template = merged["TRACE_URL"]
    if template is None:
        return
    try:
        named = isinstance(template, str) and template.format(trace_id="0") != template
    except (KeyError, IndexError, ValueError):
        named = False
    if not named:
        raise ImproperlyConfigured(
            "WORKFLOWS['TRACE_URL'] must be None or a URL template with {trace_id} and no "
            f"other field, e.g. 'https://tempo.example.com/trace/{{trace_id}}'; got {template!r}."
        )


class WorkflowSettings:
    """Attribute access to ``settings.WORKFLOWS`` merged over :data:`DEFAULTS`."""

    def __init__(self) -> None:
        self._cache: dict[str, Any] | None = None

    def _load(self) -> dict[str, Any]:
        user = getattr(settings, "WORKFLOWS", {}) or {}
        unknown = sorted(set(user) - set(DEFAULTS))
        if unknown:
            raise ImproperlyConfigured(
                f"Unknown WORKFLOWS setting(s): {', '.join(unknown)}. "
                f"Known settings: {', '.join(sorted(DEFAULTS))}."
            )
        merged = {**DEFAULTS, **user}
        if merged["ATTENTION_UNDISPATCHED_GRACE"] is None:
            merged["ATTENTION_UNDISPATCHED_GRACE"] = (
                merged["REDISPATCH_AFTER"] + UNDISPATCHED_MARGIN
            )
        for name in _GRACES:
            value = merged[name]
            if not isinstance(value, timedelta) or value < timedelta(0):
                raise ImproperlyConfigured(
                    f"WORKFLOWS[{name!r}] must be a timedelta of zero or more, got {value!r}."
                )
        for name in _POSITIVE:
            value = merged[name]
            if not isinstance(value, timedelta) or value <= timedelta(0):
                raise ImproperlyConfigured(
                    f"WORKFLOWS[{name!r}] must be a positive timedelta, got {value!r}."
                )
        for name in _COUNTS:
            value = merged[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ImproperlyConfigured(
                    f"WORKFLOWS[{name!r}] must be a whole number of 1 or more, got {value!r}."
                )
        retention = merged["RETENTION"]
        if retention is not None and (
            not isinstance(retention, timedelta) or retention < timedelta(0)
        ):
            raise ImproperlyConfigured(
                "WORKFLOWS['RETENTION'] must be None or a timedelta of zero or more, "
                f"got {retention!r}."
            )
        delays = merged["WEBHOOK_RETRY_DELAYS"]
        if not isinstance(delays, list | tuple) or not all(
            isinstance(delay, timedelta) and delay >= timedelta(0) for delay in delays
        ):
            raise ImproperlyConfigured(
                "WORKFLOWS['WEBHOOK_RETRY_DELAYS'] must be a list of timedeltas of zero or "
                f"more (the wait before each retry), got {delays!r}."
            )
        _check_routing(merged)
        _check_tracing(merged)
        token = merged["METRICS_TOKEN"]
        if token is not None and (not isinstance(token, str) or not token.strip()):
            raise ImproperlyConfigured(
                "WORKFLOWS['METRICS_TOKEN'] must be None or a non-empty string."
            )
        return merged

    def __getattr__(self, name: str) -> Any:
        if name not in DEFAULTS:
            raise AttributeError(f"Unknown WORKFLOWS setting {name!r}")
        if self._cache is None:
            self._cache = self._load()
        return self._cache[name]

    def reload(self) -> None:
        """Forget cached values (called when tests override settings)."""
        self._cache = None


workflow_settings = WorkflowSettings()


def _reload_on_change(*, setting: str, **kwargs: Any) -> None:
    if setting == "WORKFLOWS":
        workflow_settings.reload()


setting_changed.connect(_reload_on_change)
