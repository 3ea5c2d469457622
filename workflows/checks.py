"""System checks: refuse invalid definitions and unsafe configuration before they run."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from importlib.util import find_spec
from typing import Any

import django
from django.apps import AppConfig
from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper

from workflows.conf import workflow_settings
from workflows.definitions import registry
from workflows.engine.sql.connection import engine_alias
from workflows.engine.sql.execute import direct_path_missing
from workflows.models import Run

# What a check is given (the apps to check, None for all) and what it answers.
AppConfigs = Sequence[AppConfig] | None
Messages = list[checks.CheckMessage]


@checks.register("workflows")
def check_definitions(app_configs: AppConfigs = None, **kwargs: Any) -> Messages:
    """workflows.E001: every registered workflow must still validate (handlers import)."""
    return [
        checks.Error(problem, obj=workflow, id="workflows.E001")
        for workflow in registry.all()
        for problem in workflow.problems()
    ]


@checks.register("workflows")
def check_settings(app_configs: AppConfigs = None, **kwargs: Any) -> Messages:
    """workflows.E002: the WORKFLOWS setting must hold known keys and a loadable executor."""
    from workflows.engine.executor import get_executor

    try:
        workflow_settings.reload()
        get_executor()
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="workflows.E002")]
    return []


@checks.register("workflows", checks.Tags.database)
def check_sqlite(app_configs: AppConfigs = None, **kwargs: Any) -> Messages:
    """workflows.W001 to W003: SQLite must be set up for processes sharing one file."""
    return [
        message
        for alias, database in settings.DATABASES.items()
        for message in sqlite_problems(alias, database)
    ]


def sqlite_problems(alias: str, database: dict[str, Any]) -> Messages:
    """Return the warnings for one database's settings (none unless it is SQLite)."""
    if not database.get("ENGINE", "").endswith("sqlite3"):
        return []
    found: Messages = []
    options = database.get("OPTIONS", {})
    if str(options.get("transaction_mode", "")).upper() != "IMMEDIATE":
        found.append(
            checks.Warning(
                f"database {alias!r}: SQLite without transaction_mode='IMMEDIATE' fails "
                "read-then-write transitions with 'database is locked' under concurrency",
                hint="Set OPTIONS['transaction_mode'] = 'IMMEDIATE'.",
                id="workflows.W001",
            )
        )
    if "journal_mode=wal" not in str(options.get("init_command", "")).lower():
        found.append(
            checks.Warning(
                f"database {alias!r}: SQLite without WAL blocks readers while a worker writes",
                hint="Add 'PRAGMA journal_mode=WAL;' to OPTIONS['init_command'].",
                id="workflows.W002",
            )
        )
    if not options.get("timeout"):
        found.append(
            checks.Warning(
                f"database {alias!r}: SQLite without a busy timeout fails at once when "
                "another process holds the write lock",
                hint="Set OPTIONS['timeout'] (seconds), e.g. 20.",
                id="workflows.W003",
            )
        )
    return found


SQLITE_WRITE_LOCK_BACKEND = "workflows.backends.sqlite3"


@checks.register("workflows")
def check_sqlite_backend(app_configs: AppConfigs = None, **kwargs: Any) -> Messages:
    """workflows.E012: ``workflows.backends.sqlite3`` needs the Django hooks it overrides.

    It takes the write lock in overrides of private methods of Django's SQLite wrapper;
    on a Django that renamed one, the override would never run and writers would
    silently stop queueing on the lock.
    """
    aliases = [
        alias
        for alias, database in settings.DATABASES.items()
        if database.get("ENGINE") == SQLITE_WRITE_LOCK_BACKEND
    ]
    if not aliases:
        return []  # nor import the backend, which needs Python's sqlite3
    from workflows.backends.sqlite3.base import missing_hooks

    missing = missing_hooks()
    return [message for alias in aliases for message in sqlite_backend_problems(alias, missing)]


def sqlite_backend_problems(alias: str, missing: tuple[str, ...]) -> Messages:
    """Return the error for one database on the write-lock backend whose Django's SQLite
    wrapper lacks the ``missing`` hooks (none when nothing is missing)."""
    if not missing:
        return []
    return [
        checks.Error(
            f"database {alias!r} uses {SQLITE_WRITE_LOCK_BACKEND}, but Django "
            f"{django.get_version()}'s SQLite wrapper has no {', '.join(missing)}: the "
            "backend's overrides would never run and writers would not take the write lock",
            hint="Use a Django version Flowsite supports (5.2 or 6.1), or set ENGINE to "
            "'django.db.backends.sqlite3'.",
            id="workflows.E012",
        )
    ]


@checks.register("workflows")
def check_database_vendor(app_configs: AppConfigs = None, **kwargs: Any) -> Messages:
    """workflows.E003, E010, W005: the engine's database must be one its SQL runs on.

    The engine's alias is the router's ``db_for_write`` for its models: the hand-written
    statements and the ORM calls of one transition all go there.
    """
    alias = engine_alias()
    engine = settings.DATABASES.get(alias, {}).get("ENGINE", "")
    found: Messages = []
    if not engine.endswith(("sqlite3", "postgresql")):
        found.append(
            checks.Error(
                f"the workflows database {alias!r} uses {engine!r}; Flowsite runs on SQLite "
                "or PostgreSQL",
                id="workflows.E003",
            )
        )
    if engine.endswith("sqlite3") and sqlite_library_version() < MIN_SQLITE_VERSION:
        found.append(
            checks.Error(
                f"SQLite {'.'.join(map(str, sqlite_library_version()))} is too old: the engine "
                f"needs {'.'.join(map(str, MIN_SQLITE_VERSION))} or newer for "
                "UPDATE ... RETURNING",
                hint="Upgrade the SQLite library Python links against (or use PostgreSQL).",
                id="workflows.E010",
            )
        )
    read_alias = router.db_for_read(Run)
    if read_alias != alias:
        found.append(
            checks.Warning(
                f"the database router reads workflows models from {read_alias!r} but writes "
                f"them to {alias!r}: status pages and scanners would see stale state",
                hint="Route reads and writes of the workflows app to the same database.",
                id="workflows.W005",
            )
        )
    return found


# UPDATE ... RETURNING, which fan-out counters and set-based updates rely on.
MIN_SQLITE_VERSION = (3, 35, 0)


def sqlite_library_version() -> tuple[int, ...]:
    """The version of the SQLite library this process links against."""
    return sqlite3.sqlite_version_info


@checks.register("workflows")
def check_direct_path(app_configs: AppConfigs = None, **kwargs: Any) -> Messages:
    """workflows.W009: the engine's statements bypass Django's cursor only on a Django
    whose connection has what that path reads (``engine/sql/execute.py``).

    Checked on the engine's connection object, which opens no database connection.
    """
    alias = engine_alias()
    if alias not in settings.DATABASES:
        return []  # workflows.E003 reports it
    return direct_path_problems(alias, connections[alias])


def direct_path_problems(alias: str, connection: BaseDatabaseWrapper) -> Messages:
    """Return the warning for the engine's database when ``connection`` lacks what the
    direct statement path reads (none when nothing is missing)."""
    missing = direct_path_missing(connection)
    if not missing:
        return []
    return [
        checks.Warning(
            f"the workflows database {alias!r}: Django {django.get_version()} has no "
            f"{', '.join(missing)}, which the engine's direct statement path reads",
            hint="Use a Django version Flowsite supports (5.2 or 6.1); otherwise the "
            "engine's statements run through Django's cursor, correct but slower.",
            id="workflows.W009",
        )
    ]


@checks.register("workflows")
def check_django_q(app_configs: AppConfigs = None, **kwargs: Any) -> Messages:
    """workflows.E004-E008, W004: django-q2 settings that would break fencing or timing."""
    from workflows.engine.executor import uses_django_q

    if not uses_django_q():
        return []
    return django_q_problems(getattr(settings, "Q_CLUSTER", {}), longest_step_timeout())


def longest_step_timeout() -> float:
    """The longest lease of any registered task, in seconds."""
    from workflows.definitions import Task

    timeouts = [
        node.effective_timeout.total_seconds()
        for workflow in registry.all()
        for node in workflow.nodes.values()
        if isinstance(node, Task)
    ]
    return max(timeouts, default=workflow_settings.DEFAULT_STEP_TIMEOUT.total_seconds())


def django_q_problems(cluster: dict[str, Any], step_timeout: float) -> Messages:
    """Return what is unsafe in a ``Q_CLUSTER`` dict for steps lasting ``step_timeout``:
    no broker, a timeout or retry that cuts steps short or delivers them twice, and the
    queue's own retries and catch-up."""
    found: Messages = []
    if not any(cluster.get(key) for key in ("orm", "redis", "django_redis", "broker_class")):
        found.append(
            checks.Error(
                "Q_CLUSTER names no broker",
                hint="Set Q_CLUSTER['orm'] = 'default' (the queue commits with each "
                "transition) or Q_CLUSTER['redis'] to a Redis URL.",
                id="workflows.E004",
            )
        )
    return [*found, *_timing_problems(cluster, step_timeout), *_redelivery_problems(cluster)]


def _timing_problems(cluster: dict[str, Any], step_timeout: float) -> Messages:
    """workflows.E005, E006: django-q2 must neither kill a worker mid-step nor redeliver
    a task its worker still runs."""
    found: Messages = []
    budget = workflow_settings.CHAIN_BUDGET.total_seconds()
    timeout, retry = cluster.get("timeout"), cluster.get("retry")
    if timeout is None or timeout < budget + step_timeout:
        found.append(
            checks.Error(
                f"Q_CLUSTER['timeout'] = {timeout!r} would let django-q2 kill a worker in the "
                f"middle of a step: it must be at least CHAIN_BUDGET ({budget:g} s) plus the "
                f"longest step timeout ({step_timeout:g} s)",
                id="workflows.E005",
            )
        )
    if retry is None or timeout is None or retry <= timeout:
        found.append(
            checks.Error(
                f"Q_CLUSTER['retry'] = {retry!r} must be larger than its timeout ({timeout!r}); "
                "otherwise django-q2 redelivers a task while its worker is still running it",
                id="workflows.E006",
            )
        )
    return found


def _redelivery_problems(cluster: dict[str, Any]) -> Messages:
    """workflows.E007, E008, W004: failures, attempts and missed ticks are the engine's
    to count and replay, not the queue's."""
    found: Messages = []
    if not cluster.get("ack_failures"):
        found.append(
            checks.Error(
                "Q_CLUSTER['ack_failures'] must be True: the engine records failures and "
                "retries itself; an unacknowledged failure would be redelivered by the queue",
                id="workflows.E007",
            )
        )
    if cluster.get("max_attempts") != 1:
        found.append(
            checks.Error(
                f"Q_CLUSTER['max_attempts'] = {cluster.get('max_attempts')!r} must be 1: the "
                "engine counts attempts (django-q2 does not count a worker killed mid-task)",
                id="workflows.E008",
            )
        )
    if cluster.get("catch_up", True):
        found.append(
            checks.Warning(
                "Q_CLUSTER['catch_up'] is not False: after downtime django-q2 would replay "
                "every missed scanner tick",
                id="workflows.W004",
            )
        )
    return found


@checks.register("workflows")
def check_child_workflows(app_configs: AppConfigs = None, **kwargs: Any) -> Messages:
    """workflows.E009: SubWorkflow steps and child fan-outs must name registered workflows.

    Checked here rather than at class creation: the child may be declared in a module
    imported later than its parent.
    """
    from workflows.definitions import FanOut, SubWorkflow

    known = {workflow.name for workflow in registry.all()}
    return [
        checks.Error(
            f"{workflow.label()}, step {name!r}: child workflow {node.workflow!r} is not "
            f"registered (registered: {', '.join(sorted(known))})",
            obj=workflow,
            id="workflows.E009",
        )
        for workflow in registry.all()
        for name, node in workflow.nodes.items()
        if isinstance(node, SubWorkflow | FanOut)
        and node.workflow is not None
        and node.workflow not in known
    ]


@checks.register("workflows")
def check_api_schema(app_configs: AppConfigs = None, **kwargs: Any) -> Messages:
    """workflows.W006: the API's OpenAPI schema needs drf-spectacular's schema class."""
    configured = getattr(settings, "REST_FRAMEWORK", {}).get("DEFAULT_SCHEMA_CLASS", "")
    if "drf_spectacular" not in settings.INSTALLED_APPS or configured.startswith(
        "drf_spectacular."
    ):
        return []
    return [
        checks.Warning(
            "REST_FRAMEWORK['DEFAULT_SCHEMA_CLASS'] is not drf-spectacular's: the API's "
            "schema and docs endpoints (workflows.api) will fail",
            hint="Set REST_FRAMEWORK = {'DEFAULT_SCHEMA_CLASS': "
            "'drf_spectacular.openapi.AutoSchema', ...}.",
            id="workflows.W006",
        )
    ]


SUSPICIOUS_REQUEST_MIDDLEWARE = "workflows.api.middleware.SuspiciousRequestMiddleware"


@checks.register("workflows")
def check_api_middleware(app_configs: AppConfigs = None, **kwargs: Any) -> Messages:
    """workflows.W008: the API answers requests Django will not read (more than
    ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` query parameters, a host not allowed) fast and in its
    error envelope only with its middleware first; without it they cost seconds of work
    and, under ``DEBUG``, a debug page."""
    middleware = list(getattr(settings, "MIDDLEWARE", []))
    if middleware[:1] == [SUSPICIOUS_REQUEST_MIDDLEWARE]:
        return []
    placed = "is not first" if SUSPICIOUS_REQUEST_MIDDLEWARE in middleware else "is missing"
    return [
        checks.Warning(
            f"{SUSPICIOUS_REQUEST_MIDDLEWARE} {placed} in MIDDLEWARE: requests to the API "
            "with too many query parameters or a disallowed host are read by other "
            "middleware first and answered slowly, outside the API's error envelope",
            hint=f"Put '{SUSPICIOUS_REQUEST_MIDDLEWARE}' first in MIDDLEWARE.",
            id="workflows.W008",
        )
    ]


@checks.register("workflows")
def check_metrics(app_configs: AppConfigs = None, **kwargs: Any) -> Messages:
    """workflows.E011: the metrics endpoint needs prometheus-client, an optional extra."""
    try:
        enabled = workflow_settings.METRICS_ENABLED
    except ImproperlyConfigured:
        return []  # workflows.E002 reports it
    if not enabled or find_spec("prometheus_client") is not None:
        return []
    return [
        checks.Error(
            "WORKFLOWS['METRICS_ENABLED'] is True but prometheus-client is not installed",
            hint="pip install 'flowsite-workflows[metrics]', or disable METRICS_ENABLED.",
            id="workflows.E011",
        )
    ]


@checks.register("workflows")
def check_webhooks(app_configs: AppConfigs = None, **kwargs: Any) -> Messages:
    """workflows.W007: a django-q2 task sending webhooks should outlive its last request."""
    from workflows.engine.executor import uses_django_q

    try:
        if not uses_django_q():
            return []
    except ImproperlyConfigured:
        return []  # workflows.E002 reports it
    return webhook_problems(getattr(settings, "Q_CLUSTER", {}))


def webhook_problems(cluster: dict[str, Any]) -> Messages:
    """Return what is unsafe in a ``Q_CLUSTER`` dict for the webhook sender task.

    The task sends for up to ``CHAIN_BUDGET`` and then finishes its last request, which
    may wait ``WEBHOOK_TIMEOUT``; django-q2 killing it there leaves the delivery
    ``sending`` until its lease expires and the receiver may get it twice. A warning,
    not an error: the lease and the fence keep the log right, at the cost of a late,
    repeated delivery.
    """
    needed = (workflow_settings.CHAIN_BUDGET + workflow_settings.WEBHOOK_TIMEOUT).total_seconds()
    timeout = cluster.get("timeout")
    if timeout is not None and timeout >= needed:
        return []
    return [
        checks.Warning(
            f"Q_CLUSTER['timeout'] = {timeout!r} would let django-q2 kill a webhook sender "
            f"in the middle of a request: it must be at least CHAIN_BUDGET plus "
            f"WEBHOOK_TIMEOUT ({needed:g} s)",
            hint="Raise Q_CLUSTER['timeout'] or lower WORKFLOWS['WEBHOOK_TIMEOUT'].",
            id="workflows.W007",
        )
    ]
