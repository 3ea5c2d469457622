"""Reading events in commit order: a consumer's throughput, a run's history page, and
what the visibility horizon costs a read.

In one process, on a fresh temporary SQLite file set up like the demo's, or on the
PostgreSQL database ``DATABASE_URL`` names (migrated, rows left there: give it a
scratch database), as :mod:`bench.waits` does. It bulk-inserts ``--runs`` runs of
``--events`` events each, then measures:

- a consumer reading the whole history, ``consume(limit=--batch)`` then ``ack`` of the
  batch's last cursor, until nothing is left (events per second);
- one run's history page (``run_events_after``, the read behind
  ``GET /api/runs/{id}/events/``), and a run's events in ``(xid, id)`` order with and
  without the horizon condition (what the horizon costs a read), median milliseconds
  of ``--repeats``;
- the consumers' lag (``consumer_lags``, the console page and the metric) with five
  consumers at different positions;
- reads write nothing (``--names``, 1,000): that many names read with
  ``GET /api/events/?consumer=NAME``. *Before* the fix each read registered a consumer
  (reproduced here by ``workflows.consume(name)``, what that GET called); *after*, the
  same GETs are 404s that leave no row. Each time: the console's consumers page and a
  Prometheus scrape (``generate_latest`` of the metrics registry), median ms.

Prints figures and asserts no timing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.fresh_sqlite import print_table  # noqa: E402
from bench.waits import database  # noqa: E402

BATCH = 5_000


def populate(runs: int, events: int) -> list[uuid.UUID]:
    """``runs`` runs of ``events`` events each, in bulk; their ids."""
    from workflows.models import Event, Run

    ids = [uuid.uuid4() for _ in range(runs)]
    Run.objects.bulk_create(
        Run(id=pk, workflow_name="bench_consumers", workflow_version=1, snapshot={}) for pk in ids
    )
    rows = [Event(run_id=pk, type=f"bench.{n}") for n in range(events) for pk in ids]
    for start in range(0, len(rows), BATCH):
        Event.objects.bulk_create(rows[start : start + BATCH])
    return ids


def median_ms(read: Callable[[], object], repeats: int) -> str:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        read()
        times.append(time.perf_counter() - started)
    return f"{statistics.median(times) * 1000:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1_000)
    parser.add_argument("--events", type=int, default=30)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--names", type=int, default=1_000)
    parser.add_argument("--page-repeats", type=int, default=5)
    args = parser.parse_args()
    with database() as described:
        import workflows
        from workflows.models import Event, EventConsumer
        from workflows.queries.consumers import consumer_lags
        from workflows.queries.event_cursor import START, readable, run_events_after

        EventConsumer.objects.all().delete()
        run_ids = populate(args.runs, args.events)
        # As autovacuum would after a load: without statistics PostgreSQL's planner
        # takes the freshly loaded table for a small one.
        from django.db import connection

        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE workflows_event")
        total = Event.objects.count()

        name = f"bench-{uuid.uuid4().hex[:8]}"
        received = 0
        started = time.perf_counter()
        while events := workflows.consume(name, limit=args.batch):
            received += len(events)
            workflows.ack(name, events[-1].cursor)
        consumed = time.perf_counter() - started

        run_id = run_ids[len(run_ids) // 2]
        plain = Event.objects.filter(run_id=run_id).order_by("xid", "id")
        behind_horizon = readable(plain)
        for index in range(5):
            events = workflows.consume(f"lagging-{index}", limit=max(1, index * 200))
            workflows.ack(f"lagging-{index}", events[-1].cursor)

        print(f"\n{described}: {args.runs} runs x {args.events} events ({total} in the table)")
        print_table(
            [
                ("consumer: events received", f"{received}"),
                (f"consumer: events/s (consume {args.batch} + ack)", f"{received / consumed:.0f}"),
                (
                    "run page as the API reads it (ms)",
                    median_ms(lambda: run_events_after(run_id, START, 100), args.repeats),
                ),
                (
                    "run's events, (xid, id) order (ms)",
                    median_ms(lambda: list(plain[:100]), args.repeats),
                ),
                (
                    "the same below the horizon (ms)",
                    median_ms(lambda: list(behind_horizon[:100]), args.repeats),
                ),
                (
                    "consumer_lags, 6 consumers (ms)",
                    median_ms(lambda: consumer_lags(), args.repeats),
                ),
            ]
        )
        print_table(names_read(args.names, args.page_repeats))


def names_read(count: int, repeats: int) -> list[tuple[str, str]]:
    """The consumers page and a scrape after ``count`` names were read, before (each
    read registered a consumer) and after (reads are 404s and write nothing)."""
    from django.contrib.auth.models import User
    from django.test import Client
    from prometheus_client import generate_latest
    from rest_framework.authtoken.models import Token

    import workflows
    from workflows.metrics.prometheus import registry
    from workflows.models import EventConsumer

    admin = User.objects.filter(username="bench-admin").first() or User.objects.create_superuser(
        "bench-admin", password="pw"
    )
    browser = Client(HTTP_HOST="127.0.0.1")
    browser.force_login(admin)
    api = Client(
        HTTP_HOST="127.0.0.1",
        HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=admin)[0].key}",
    )

    def page() -> None:
        response = browser.get("/admin/workflows/run/consumers/")
        assert response.status_code == 200, response.status_code

    def scrape() -> None:
        generate_latest(registry)

    rows: list[tuple[str, str]] = []
    EventConsumer.objects.all().delete()
    started = time.perf_counter()
    for n in range(count):
        workflows.consume(f"reader-{n}", limit=1)  # what GET /api/events/ did before
    rows.append((f"before: {count} names read (s)", f"{time.perf_counter() - started:.1f}"))
    rows.append(("before: consumers left behind", f"{EventConsumer.objects.count()}"))
    rows.append(("before: consumers page (ms)", median_ms(page, repeats)))
    rows.append(("before: Prometheus scrape (ms)", median_ms(scrape, repeats)))
    EventConsumer.objects.all().delete()
    statuses = set()
    started = time.perf_counter()
    for n in range(count):
        statuses.add(api.get("/api/events/", {"consumer": f"reader-{n}"}).status_code)
    rows.append(
        (
            f"after: {count} GETs (s), status {sorted(statuses)}",
            f"{time.perf_counter() - started:.1f}",
        )
    )
    rows.append(("after: consumers left behind", f"{EventConsumer.objects.count()}"))
    rows.append(("after: consumers page (ms)", median_ms(page, repeats)))
    rows.append(("after: Prometheus scrape (ms)", median_ms(scrape, repeats)))
    return rows


if __name__ == "__main__":
    main()
