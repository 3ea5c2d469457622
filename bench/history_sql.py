"""A production-shaped history written by bulk SQL: ``INSERT ... SELECT`` over a number
series (PostgreSQL's ``generate_series``, SQLite's recursive common table expression),
so that a million runs take minutes, not hours (``bench/million.py``, ``bench/scale.py``).

Run ``n`` (1 … N, the newest last) of a fill is made of:

* a run of one of :data:`WORKFLOWS`, created ``(N - n) / N`` of :data:`HISTORY_DAYS`
  ago, with a business key ``BK-<k>`` (``k`` a permutation of 1 … N, not in time
  order); its status follows :data:`STATUSES` (mostly finished) among the newest
  runs (the *live era*), while older runs all ended (completed, failed, compensated or
  cancelled, as production's are); a deadline on one run in 47, a flow of three member
  runs on one in 100 of the live era;
* :data:`STEPS` steps: two tasks, then a gate, a sleep or a signal (by ``n % 3``), then
  a task; their states follow the run's (a waiting run waits at its third step: a gate
  in the approvals inbox, a sleep with its scheduled timer, a signal);
* :data:`EVENTS` events (the run's start and end, a start and an end per step);
* tags, when the code has them (``Run.tags`` and the ``RunTag`` rows): a customer among
  :data:`CUSTOMERS` and a region among :data:`REGIONS`.

The live era is the newest ``1 / LIVE_SHARE`` of the runs by default, so that the live
work (waiting gates, timers, live runs with a deadline, flows) grows with the history:
a million runs hold 2,500 pending gates where 10,000 hold 26. With ``live=L`` it is the
newest :func:`live_era` ``(L)`` runs whatever the history's size (``L`` runs in live
states, rounded up to whole cycles of :data:`STATUSES`): a history a hundred times
longer with the same live work, which is what a year of history is (``bench/million.py
--live``). ``live=125`` gives every size the live era 10,000 runs have by default.

Every other column takes the model's default, read from the model (a column added
later is filled the same way). Primary keys are explicit (steps) or the database's own
(events, tags), offset so that a fill goes into a database that already holds rows.
With ``finished_only`` every run is completed (the history ``bench/scale.py`` measures
the per-step cost against: nothing in it is ready, due or claimable).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

# Twenty runs' statuses among the newest runs (mostly finished), as admin_pages has them.
from bench.admin_pages import STATUSES

HISTORY_DAYS = 365
# The names and keys bench/pages.py asks for (``workflow=bulk_1``, a search of ``BK-4``).
WORKFLOWS = tuple(f"bulk_{number}" for number in range(6))
LIVE_SHARE = 20  # by default, the newest 1/20 of the runs has live runs among them
LIVE_STATUSES = ("waiting", "running", "pending")
STEPS = 4
KEY_STRIDE = 7919  # a prime: n * KEY_STRIDE mod N visits every number below N once
EVENTS = 10
CUSTOMERS = 300
REGIONS = ("eu-west", "eu-central", "us-east", "us-west", "ap-south")
CHUNK = 50_000  # runs per statement group (a transaction each)
WAITS = ("gate", "sleep", "signal")


@dataclass
class Dialect:
    """The few expressions that differ between PostgreSQL and SQLite."""

    vendor: str
    now: datetime

    def series(self, name: str, low: int, high: int) -> str:
        if self.vendor == "postgresql":
            return f"{name}(n) AS (SELECT generate_series({low}, {high}))"
        return f"{name}(n) AS (SELECT {low} UNION ALL SELECT n + 1 FROM {name} WHERE n < {high})"

    def uuid(self, salt: int, number: str) -> str:
        """A deterministic UUID of ``number`` (an SQL integer), distinct per ``salt``."""
        if self.vendor == "postgresql":
            return (
                f"(lpad(to_hex({salt}), 8, '0') || '-0000-4000-8000-' "
                f"|| lpad(to_hex({number}), 12, '0'))::uuid"
            )
        return f"printf('%%08x000040008000%%012x', {salt}, {number})"

    def ago(self, seconds: str) -> str:
        """The timestamp ``seconds`` (an SQL integer, negative for the future) before now."""
        if self.vendor == "postgresql":
            return f"(TIMESTAMPTZ '{self.now.isoformat()}' - ({seconds}) * INTERVAL '1 second')"
        stamp = self.now.strftime("%Y-%m-%d %H:%M:%S")
        return f"datetime('{stamp}', (-({seconds})) || ' seconds')"

    def json(self, value: Any) -> str:
        text = json.dumps(value).replace("'", "''")
        return f"'{text}'::jsonb" if self.vendor == "postgresql" else f"'{text}'"

    def json_object(self, pairs: dict[str, str]) -> str:
        args = ", ".join(f"'{key}', {value}" for key, value in pairs.items())
        function = "jsonb_build_object" if self.vendor == "postgresql" else "json_object"
        return f"{function}({args})"


def case(number: str, values: tuple[str, ...]) -> str:
    """``values[number % len(values)]`` as SQL (string literals)."""
    whens = " ".join(f"WHEN {i} THEN '{value}'" for i, value in enumerate(values))
    return f"(CASE {number} %% {len(values)} {whens} END)"


def insert_select(model: Any, exprs: dict[str, str], ctes: list[str], source: str) -> None:
    """``WITH ctes INSERT INTO model's table (...) SELECT ... FROM source``: the columns
    ``exprs`` names take those SQL expressions, every other column the model's default
    (or NULL, or the database's own default and sequence)."""
    from django.db import connection
    from django.db.models import NOT_PROVIDED, AutoField, BigAutoField
    from django.utils import timezone

    quote = connection.ops.quote_name
    columns, values, params = [], [], []
    for field in model._meta.concrete_fields:
        if field.column in exprs:
            columns.append(field.column)
            values.append(exprs[field.column])
        elif isinstance(field, AutoField | BigAutoField) or field.db_default is not NOT_PROVIDED:
            continue
        elif getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
            # A stamp the caller did not date (a model added later, RunTag's say): now.
            columns.append(field.column)
            values.append("%s")
            params.append(field.get_db_prep_save(timezone.now(), connection))
        elif field.has_default():
            columns.append(field.column)
            values.append("%s")
            params.append(field.get_db_prep_save(field.get_default(), connection))
        elif field.null:
            continue
        else:
            raise ValueError(f"{model.__name__}.{field.name} has no default and no value")
    sql = (
        f"WITH {'RECURSIVE ' if connection.vendor == 'sqlite' else ''}{', '.join(ctes)} "
        f"INSERT INTO {model._meta.db_table} ({', '.join(map(quote, columns))}) "
        f"SELECT {', '.join(values)} FROM {source}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def optional_model(name: str) -> Any | None:
    from django.apps import apps

    try:
        return apps.get_model("workflows", name)
    except LookupError:
        return None


def has_field(model: Any, name: str) -> bool:
    return any(field.name == name for field in model._meta.concrete_fields)


def next_id(model: Any) -> int:
    from django.db.models import Max

    return (model.objects.aggregate(top=Max("pk"))["top"] or 0) + 1


def live_era(live: int) -> int:
    """The newest runs among which ``live`` runs are in live states: whole cycles of
    :data:`STATUSES` (5 live statuses in 20), rounded up."""
    if live < 0:
        raise ValueError(f"live runs: {live} is negative")
    per_cycle = sum(status in LIVE_STATUSES for status in STATUSES)
    return -(-live // per_cycle) * len(STATUSES)


def fill(
    runs: int,
    *,
    finished_only: bool = False,
    live: int | None = None,
    progress: Callable[[int, float], None] | None = None,
) -> dict[str, int]:
    """Insert ``runs`` runs as the module docstring says; return the tables' row counts.
    ``live``: the runs in live states (None: as many as the newest ``1 / LIVE_SHARE`` of
    the runs hold, which grows with ``runs``)."""
    from django.db import connection, transaction
    from django.utils import timezone

    from workflows.models import Event, Flow, FlowMember, Run, Step, Timer

    dialect = Dialect(connection.vendor, timezone.now())
    salt = secrets.randbelow(2**31) | 1
    step_base = next_id(Step)
    run_tag = optional_model("RunTag")
    tags = has_field(Run, "tags")
    era = runs // LIVE_SHARE if live is None else min(live_era(live), runs)
    live_from = runs - era  # runs above this one may be live
    n = "g.n"
    if finished_only:
        status = "'completed'"
    else:
        mixed = case(n, STATUSES)
        ended = case(n, ("completed",) * 17 + ("failed", "compensated", "cancelled"))
        status = f"(CASE WHEN {n} > {live_from} THEN {mixed} ELSE {ended} END)"
    created_ago = f"CAST({runs} - {n} AS BIGINT) * {HISTORY_DAYS * 86400} / {runs} + 60"
    wait = case(n, WAITS)
    # Members of the flows of live-era hundreds only (whose flow the fill made).
    flowed = f"{n} / 100 * 100 > {live_from} AND {n} %% 100 < 3"
    started = time.perf_counter()
    for low in range(1, runs + 1, CHUNK):
        high = min(low + CHUNK - 1, runs)
        with transaction.atomic():
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    # No foreign-key or notify triggers for rows made consistent here.
                    cursor.execute("SET LOCAL session_replication_role = replica")
            runs_cte = (
                f"r AS (SELECT {n} AS n, {status} AS status, {created_ago} AS ago, "
                f"{wait} AS wait FROM g)"
            )
            ctes = [dialect.series("g", low, high), runs_cte]
            # Flows first: one per hundred of the newest runs, three members each.
            flow_of = dialect.uuid(salt + 2, f"{n} / 100")
            if not finished_only:
                insert_select(
                    Flow,
                    {
                        "id": flow_of,
                        "name": f"'flow-' || ({n} / 100)",
                        "key": f"'F-{salt}-' || ({n} / 100)",
                        "status": "'completed'",
                        "created_at": dialect.ago(created_ago),
                        "updated_at": dialect.ago(created_ago),
                    },
                    [dialect.series("g", low, high)],
                    f"g WHERE {n} > {live_from} AND {n} %% 100 = 0",
                )
            # A deadline a few hours after the run's creation (some before it ended).
            deadline = dialect.ago("r.ago - 3600 * (2 + r.n %% 7)")
            member = flowed.replace(n, "r.n")
            run_exprs = {
                "id": dialect.uuid(salt, "r.n"),
                "workflow_name": case("r.n", WORKFLOWS),
                "workflow_version": "1",
                "snapshot": dialect.json({"name": "bench", "version": 1, "steps": []}),
                "status": "r.status",
                # Keys in no particular order of time (a permutation of 1 … N).
                "business_key": f"'BK-' || (CAST(r.n AS BIGINT) * {KEY_STRIDE} %% {runs} + 1)",
                # One run in 47 (prime to the statuses' 20: every status has some).
                "deadline": f"CASE WHEN r.n %% 47 = 0 THEN {deadline} END",
                "flow_id": f"CASE WHEN {member} THEN {flow_of.replace(n, 'r.n')} END",
                "created_at": dialect.ago("r.ago"),
                "updated_at": dialect.ago("r.ago"),
                "started_at": dialect.ago("r.ago"),
                "finished_at": (
                    f"CASE WHEN r.status IN ('waiting', 'running', 'pending') THEN NULL "
                    f"ELSE {dialect.ago('r.ago - 30')} END"
                ),
            }
            if finished_only:
                run_exprs.pop("deadline")
                run_exprs.pop("flow_id")
            if tags:
                run_exprs["tags"] = dialect.json_object(
                    {
                        "customer": f"'C-' || (r.n %% {CUSTOMERS})",
                        "region": case("r.n", REGIONS),
                    }
                )
            insert_select(Run, run_exprs, ctes, "r")
            if not finished_only:
                insert_select(
                    FlowMember,
                    {
                        "flow_id": flow_of.replace(n, "r.n"),
                        "name": "'m' || (r.n %% 100)",
                        "run_id": dialect.uuid(salt, "r.n"),
                        "join": "'all'",
                        "version": "1",
                        "created_at": dialect.ago("r.ago"),
                    },
                    ctes,
                    f"r WHERE {flowed.replace(n, 'r.n')}",
                )
            # Steps k = 1..STEPS: the third is the wait; their states follow the run's.
            step_status = (
                "(CASE WHEN r.status IN ('completed', 'compensated') THEN 'completed' "
                "WHEN s.n < 3 THEN 'completed' "
                "WHEN s.n = 3 AND r.status = 'waiting' THEN 'waiting' "
                "WHEN s.n = 3 AND r.status = 'running' THEN 'running' "
                "WHEN s.n = 3 AND r.status IN ('failed', 'cancelled') THEN r.status "
                "ELSE 'pending' END)"
            )
            kind = "(CASE WHEN s.n = 3 THEN r.wait ELSE 'task' END)"
            step_ctes = [
                *ctes,
                dialect.series("s", 1, STEPS),
                f"st AS (SELECT r.n AS n, s.n AS k, r.ago AS ago, r.wait AS wait, "
                f"{step_status} AS status, {kind} AS kind FROM r CROSS JOIN s)",
            ]
            step_id = f"{step_base - 1} + (st.n - 1) * {STEPS} + st.k"
            insert_select(
                Step,
                {
                    "id": step_id,
                    "run_id": dialect.uuid(salt, "st.n"),
                    "name": (
                        "(CASE st.k WHEN 1 THEN 'receive' WHEN 2 THEN 'check' "
                        "WHEN 3 THEN 'wait_' || st.wait ELSE 'ship' END)"
                    ),
                    "kind": "st.kind",
                    "status": "st.status",
                    "permission": (
                        "(CASE WHEN st.kind = 'gate' THEN 'workflows.view_run' ELSE '' END)"
                    ),
                    "signal_name": "(CASE WHEN st.kind = 'signal' THEN 'paid' ELSE '' END)",
                    "failure_class": (
                        "(CASE WHEN st.status = 'failed' THEN 'permanent' ELSE '' END)"
                    ),
                    "attempt": "(CASE WHEN st.status = 'pending' THEN 0 ELSE 1 END)",
                    "created_at": dialect.ago("st.ago"),
                    "updated_at": dialect.ago("st.ago"),
                    "started_at": (
                        "CASE WHEN st.status = 'pending' THEN NULL "
                        f"ELSE {dialect.ago('st.ago')} END"
                    ),
                    "finished_at": (
                        "CASE WHEN st.status IN ('completed', 'failed', 'cancelled') "
                        f"THEN {dialect.ago('st.ago - 5 * st.k')} END"
                    ),
                },
                step_ctes,
                "st",
            )
            insert_select(
                Timer,
                {
                    "run_id": dialect.uuid(salt, "st.n"),
                    "step_id": step_id,
                    "kind": "'sleep'",
                    "due_at": dialect.ago("-3600 - st.n %% 86400"),
                    "status": "'scheduled'",
                    "version": "1",
                    "created_at": dialect.ago("st.ago"),
                },
                step_ctes,
                "st WHERE st.kind = 'sleep' AND st.status = 'waiting'",
            )
            # Events e = 1..EVENTS: the run's start, a start and an end per step, its end.
            event_ctes = [
                *ctes,
                dialect.series("e", 1, EVENTS),
                "ev AS (SELECT r.n AS n, e.n AS k, r.ago AS ago, r.status AS status "
                "FROM r CROSS JOIN e)",
            ]
            inner = "((ev.k - 2) / 2 + 1)"
            insert_select(
                Event,
                {
                    "run_id": dialect.uuid(salt, "ev.n"),
                    "step_id": (
                        f"CASE WHEN ev.k = 1 OR ev.k = {EVENTS} THEN NULL "
                        f"ELSE {step_base - 1} + (ev.n - 1) * {STEPS} + {inner} END"
                    ),
                    "type": (
                        f"(CASE WHEN ev.k = 1 THEN 'run.started' "
                        f"WHEN ev.k = {EVENTS} THEN 'run.' || ev.status "
                        f"WHEN ev.k %% 2 = 0 THEN 'step.started' ELSE 'step.completed' END)"
                    ),
                    "payload": dialect.json({}),
                    "created_at": dialect.ago("ev.ago - ev.k"),
                    "published": "TRUE" if connection.vendor == "postgresql" else "1",
                },
                event_ctes,
                "ev",
            )
            if run_tag is not None:
                for key, value in (
                    ("customer", f"'C-' || (r.n %% {CUSTOMERS})"),
                    ("region", case("r.n", REGIONS)),
                ):
                    insert_select(
                        run_tag,
                        {
                            "run_id": dialect.uuid(salt, "r.n"),
                            "key": f"'{key}'",
                            "value": value,
                            # The run's own creation time, which the tag filter reads.
                            "created_at": run_exprs["created_at"],
                        },
                        ctes,
                        "r",
                    )
        if progress is not None:
            progress(high, time.perf_counter() - started)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT setval(pg_get_serial_sequence('workflows_step', 'id'), "
                "(SELECT max(id) FROM workflows_step))"
            )
    return table_counts()


def table_counts() -> dict[str, int]:
    """Rows of each table a fill writes (estimates on PostgreSQL, after ANALYZE: exact
    counts of ten million rows take seconds)."""
    from django.db import connection

    from workflows.models import Event, Run, Step, Timer

    models = {"runs": Run, "steps": Step, "events": Event, "timers": Timer}
    tag = optional_model("RunTag")
    if tag is not None:
        models["tags"] = tag
    if connection.vendor != "postgresql":
        return {name: model.objects.count() for name, model in models.items()}
    with connection.cursor() as cursor:
        counts = {}
        for name, model in models.items():
            cursor.execute(
                "SELECT reltuples::bigint FROM pg_class WHERE relname = %s",
                [model._meta.db_table],
            )
            counts[name] = cursor.fetchone()[0]
        return counts


def analyze() -> None:
    """Statistics for the planner (and, on PostgreSQL, the visibility map for index-only
    scans), as autovacuum would make them within a minute of such inserts."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE" if connection.vendor == "postgresql" else "ANALYZE")
