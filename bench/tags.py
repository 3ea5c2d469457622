"""Finding runs by tag at scale, on PostgreSQL: the plans and the times of a tag filter.

What it measures: a PostgreSQL database of its own (``tags_bench``, created and dropped
as ``bench/workers.py`` does) filled by bulk SQL with N runs (default 300,000), spread
over 30 days and every run status, one step each, each tagged with a customer (one of
300: a rare tag, a third of one percent of the runs) and a region (one of 3: a common
tag, a third of them), then ``VACUUM ANALYZE`` as autovacuum would. Then:

* the plan and the time (``EXPLAIN ANALYZE``) of ``list_runs``' query with a rare tag, a
  common tag, both, a rare tag with a status, and a common tag with a rare status, so a
  plan that walks the runs' ``created_at`` index probing the tag of every run (the trap
  of ``ORDER BY created_at DESC LIMIT 50`` with a rare tag) shows up;
* the server-side times of the API's runs list with ``?tag=`` (one, two, with a status)
  and of the console's runs list filtered by a tag, and offering the tags in use (the
  keys, and the values of the customer key, read by a loose index scan).

It prints figures with the goals (50 ms an API list, 150 ms a console page; medians) and
never asserts them; record the machine's load (``uptime``) with them.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.admin_pages import API_GOAL_MS, CONSOLE_GOAL_MS, STATUSES, timed  # noqa: E402
from bench.fresh_sqlite import configure_django  # noqa: E402

POSTGRES_DB = "tags_bench"
CUSTOMERS = 300
REGIONS = ("eu", "us", "ap")
RARE = {"customer": "c042"}
COMMON = {"region": "eu"}


def populate(runs: int) -> dict[str, str]:
    """The runs, their steps and tag rows (bulk SQL from one template row each)."""
    from django.contrib.auth.models import User
    from django.db import connection
    from rest_framework.authtoken.models import Token

    from workflows.models import Run, Step

    template = Run.objects.create(
        workflow_name="bulk_0", workflow_version=1, snapshot={"name": "bulk"}, status="completed"
    )
    step = Step.objects.create(run=template, name="work", kind="task", status="completed")
    statuses = "ARRAY[" + ", ".join(f"'{status}'" for status in STATUSES) + "]"
    regions = "ARRAY[" + ", ".join(f"'{region}'" for region in REGIONS) + "]"
    with connection.cursor() as cursor:
        # LATERAL, so that each new row's record is built once, not once per column.
        cursor.execute(
            "INSERT INTO workflows_run SELECT r.* FROM workflows_run t, "
            "generate_series(1, %s) g, LATERAL json_populate_record(t, json_build_object("
            "'id', gen_random_uuid(), "
            f"'status', ({statuses})[mod(g, {len(STATUSES)}) + 1], "
            "'workflow_name', 'bulk_' || mod(g, 5), "
            "'business_key', 'BK-' || g, "
            "'created_at', now() - make_interval(secs => (%s - g) * 2592000.0 / %s), "
            "'tags', json_build_object("
            f"'customer', 'c' || lpad(mod(g, {CUSTOMERS})::text, 3, '0'), "
            f"'region', ({regions})[mod(g, {len(REGIONS)}) + 1])"
            ")) r WHERE t.id = %s",
            [runs, runs, runs, template.pk],
        )
        cursor.execute(
            "INSERT INTO workflows_step SELECT n.* FROM workflows_step s, workflows_run r, "
            "LATERAL json_populate_record(s, json_build_object("
            "'id', nextval(pg_get_serial_sequence('workflows_step', 'id')), 'run_id', r.id, "
            "'status', CASE WHEN r.status IN ('completed', 'compensated') THEN 'completed' "
            "WHEN r.status = 'failed' THEN 'failed' ELSE 'running' END"
            ")) n WHERE s.id = %s AND r.id <> %s",
            [step.pk, template.pk],
        )
        cursor.execute(
            "INSERT INTO workflows_runtag (run_id, key, value, created_at) "
            "SELECT id, 'customer', tags->>'customer', created_at FROM workflows_run "
            "WHERE tags ? 'customer' UNION ALL "
            "SELECT id, 'region', tags->>'region', created_at FROM workflows_run "
            "WHERE tags ? 'region'"
        )
        cursor.execute("VACUUM ANALYZE")
    user = User.objects.create_superuser("bench", password="bench")
    return {"token": Token.objects.create(user=user).key}


def plans() -> list[tuple[str, str, str]]:
    """``EXPLAIN ANALYZE`` of list_runs' query for each filter: (filter, ms, plan shape)."""
    from workflows.models import Run
    from workflows.queries.runs import _SUMMARY_FIELDS
    from workflows.queries.tags import tagged

    cases: dict[str, tuple[dict[str, str], str | None]] = {
        "rare tag (1 of 300)": (RARE, None),
        "common tag (1 of 3)": (COMMON, None),
        "rare + common": ({**RARE, **COMMON}, None),
        "rare tag + status failed": (RARE, "failed"),
        "common tag + status running": (COMMON, "running"),
    }
    rows = []
    for name, (tags, status) in cases.items():
        runs = Run.objects.only(*_SUMMARY_FIELDS).order_by("-created_at", "-id")
        if status:
            runs = runs.filter(status=status)
        runs = tagged(runs, tags)[:50]
        plan = runs.explain(analyze=True)
        took = re.search(r"Execution Time: ([\d.]+) ms", plan)
        nodes = re.findall(r"->\s+([A-Za-z ]+?)(?: using (\w+))? (?:on|\()", plan)
        shape = " > ".join(f"{node}{f' {index}' if index else ''}" for node, index in nodes[:6])
        rows.append((name, took.group(1) if took else "?", shape))
        if "--verbose" in sys.argv:
            print(f"-- {name}\n{plan}\n")
    return rows


def pages(token: str, repeats: int) -> list[tuple[str, str, str, str]]:
    """Median request times of the API and console pages with tag filters."""
    from django.contrib.auth.models import User
    from django.test import Client

    console = Client(HTTP_HOST="localhost")
    console.force_login(User.objects.get(username="bench"))
    api = Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Token {token}")
    rare, common = "tag=customer:c042", "tag=region:eu"
    urls = [
        ("API runs ?tag rare", api, f"/api/runs/?{rare}", API_GOAL_MS),
        ("API runs ?tag common", api, f"/api/runs/?{common}", API_GOAL_MS),
        ("API runs ?tag rare&tag common", api, f"/api/runs/?{rare}&{common}", API_GOAL_MS),
        ("API runs ?tag rare&status=failed", api, f"/api/runs/?{rare}&status=failed", API_GOAL_MS),
        ("console runs list", console, "/admin/workflows/run/", CONSOLE_GOAL_MS),
        ("console runs ?tag rare", console, f"/admin/workflows/run/?{rare}", CONSOLE_GOAL_MS),
        ("console runs ?tag common", console, f"/admin/workflows/run/?{common}", CONSOLE_GOAL_MS),
        (
            "console runs ?tag_key=customer",
            console,
            "/admin/workflows/run/?tag_key=customer",
            CONSOLE_GOAL_MS,
        ),
    ]
    rows = []
    for name, client, url, goal in urls:
        figures = timed(client, url, repeats)
        if figures is None:
            rows.append((name, "absent", "", ""))
            continue
        seconds, queries = figures
        median = statistics.median(seconds) * 1000
        verdict = "met" if median <= goal else "NOT met"
        rows.append((name, f"{median:.1f}", str(queries), f"≤ {goal:g} {verdict}"))
    return rows


def print_rows(headers: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers))]
    for row in [headers, tuple("-" * width for width in widths), *rows]:
        print("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300_000, help="runs to insert (300,000)")
    parser.add_argument("--repeats", type=int, default=5, help="requests per page (5)")
    parser.add_argument("--verbose", action="store_true", help="print each whole plan")
    args = parser.parse_args(argv)
    from bench.workers import postgres_database

    with (
        tempfile.TemporaryDirectory(prefix="flowsite-bench-") as tmp,
        postgres_database(POSTGRES_DB) as url,
    ):
        configure_django(Path(tmp), None, database_url=url)
        from django.db import connections

        try:
            started = time.perf_counter()
            ids = populate(args.runs)
            print(f"Tag filters over {args.runs:,} runs on PostgreSQL ({POSTGRES_DB})")
            print(f"  inserted in {time.perf_counter() - started:.1f} s\n")
            print_rows(("list_runs' query", "ms (EXPLAIN ANALYZE)", "plan"), plans())
            print_rows(("page", "median ms", "queries", "goal"), pages(ids["token"], args.repeats))
        finally:
            connections.close_all()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
