"""Rate limits: at most N starts per period, shared by every worker through the database.

Each limited key (``task:<workflow>.<step>``, ``queue:<name>``) has one
``RateBucket`` row holding the moments of its starts within the last period. A claim
reads the buckets it needs locked (``FOR NO KEY UPDATE`` on PostgreSQL; SQLite's
``BEGIN IMMEDIATE`` already serialises writers), and records its start in all of them
or in none: so no window of one period ever holds more starts than the limit, across
any number of workers. Moments come from the database clock, which every host shares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from workflows.definitions.limits import RateLimit
from workflows.engine.sql.connection import engine_alias
from workflows.engine.sql.limit_rows import locked_rate_bucket
from workflows.engine.sql.updates import cas_update
from workflows.errors import StaleState
from workflows.models import RateBucket


@dataclass(frozen=True)
class _Bucket:
    pk: int
    version: int
    recent: list[float]  # starts within the last period, oldest first
    now: float


def _read(key: str, rate: RateLimit) -> _Bucket:
    """The bucket of ``key``, locked, with its starts within the last period; created
    on first use (a concurrent creation is not an error)."""
    row = locked_rate_bucket(key)
    if row is None:
        RateBucket.objects.using(engine_alias()).bulk_create(
            [RateBucket(key=key)], ignore_conflicts=True
        )
        row = locked_rate_bucket(key)
        assert row is not None, f"rate bucket {key!r} was created just above"
    since = row.now - rate.period.total_seconds()
    return _Bucket(row.pk, row.version, sorted(t for t in row.starts if t > since), row.now)


def take(limits: Sequence[tuple[str, RateLimit]]) -> tuple[str, float] | None:
    """Record one start under every ``(key, limit)``, or under none.

    Returns ``None`` when the start is allowed (and recorded), else the key of the
    limit that refuses it longest and how many seconds until every limit allows one.
    Inside the caller's transition: the start counts only if it commits. Two workers
    taking the last start of a period serialise on the bucket rows; the second sees the
    first's start and waits.
    """
    buckets = [(key, rate, _read(key, rate)) for key, rate in limits]
    waits = [
        (
            bucket.recent[len(bucket.recent) - rate.count]
            + rate.period.total_seconds()
            - bucket.now,
            key,
        )
        for key, rate, bucket in buckets
        if len(bucket.recent) >= rate.count
    ]
    if waits:
        wait, key = max(waits)
        return key, max(0.0, wait)
    for key, _rate, bucket in buckets:
        if not cas_update(
            RateBucket, bucket.pk, version=bucket.version, starts=[*bucket.recent, bucket.now]
        ):
            raise StaleState(f"rate limit {key!r} changed while a start was recorded")
    return None
