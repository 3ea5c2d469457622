"""Writing a run's tags: at its start, and an attempt's ``ctx.set_tags`` with its result.

A run's tags live twice, written together in one transaction: ``Run.tags``, the dict
shown and returned, and one ``RunTag`` row a tag (with the run's ``created_at``), which a
filter by tag reads through its (key, value, created_at, run) index
(:mod:`workflows.queries.tags`). Nothing else writes either.

At the start (:func:`write_start_tags`), the rows are inserted with the run, in its
creating transaction; a run without tags inserts none and costs no statement. A child
run and a flow member start with their parent's (the flow's) tags unless given their
own (:mod:`workflows.engine.start`).

A handler's ``ctx.set_tags(patch)`` calls are kept on its lease (``Lease.tag_patches``)
and committed here (:func:`commit_tags`), inside the transition that records the
attempt's outcome, after its fenced write matched, exactly like its variables
(:mod:`workflows.engine.variables`): an attempt that fails, times out, is revoked or
lost its lease never reaches this point and writes no tags. The transition holds the
run, so reading the committed tags, merging them in Python and compare-and-setting the
run cannot interleave with another writer; the 32-tag limit is checked again against
the tags committed by then (a parallel branch may have added some). An attempt that
set no tags costs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from uuid import UUID

from workflows.engine.lease import Lease
from workflows.engine.runs import update_locked_run
from workflows.engine.scope import RunScope
from workflows.errors import PermanentError
from workflows.models import Run, RunTag
from workflows.tags import count_problem, patched


class TagsRefused(PermanentError):
    """The attempt's tag patches would give the run more than 32 tags, as committed by
    now (a parallel branch may have added some since the handler checked): the attempt
    fails for good and writes nothing, its result included."""


def write_start_tags(run_id: UUID, created_at: datetime, tags: Mapping[str, str]) -> None:
    """The ``RunTag`` rows of a new run's ``tags`` (checked), with the run's
    ``created_at``, in its creating transaction; nothing at all for a run without tags."""
    if tags:
        RunTag.objects.bulk_create(
            [
                RunTag(run_id=run_id, key=key, value=value, created_at=created_at)
                for key, value in tags.items()
            ]
        )


def commit_tags(scope: RunScope, lease: Lease) -> None:
    """Apply ``lease``'s pending tag patches to its run, in the caller's transition,
    after the attempt's fenced write matched; nothing when it has none.

    Writes ``Run.tags`` (compare-and-set on the held run's status and version) and the
    ``RunTag`` rows that changed, and records a ``run.tags_set`` event naming the step,
    the attempt, the patches and the tags they made. Raises :class:`TagsRefused` when the
    result would have more than 32 tags: the caller's transaction rolls back (the fenced
    write with it) and the worker records the attempt as failed for good.
    """
    patches = lease.tag_patches
    if not patches:
        return
    run = scope.run
    stored, created_at = Run.objects.filter(pk=run.pk).values_list("tags", "created_at").get()
    committed = stored or {}
    tags = patched(committed, patches)
    problem = count_problem(tags, field="the run's tags")
    if problem is not None:
        raise TagsRefused(f"{lease.label} attempt {lease.attempt_in_round}: {problem}")
    tags = dict(sorted(tags.items()))
    if tags != committed:
        update_locked_run(run, "its tags were written", tags=tags)
        write_changed_rows(run.pk, created_at, committed, tags)
    scope.events.add(run.pk, "run.tags_set", **lease.writer(), patches=patches, tags=tags)


def write_changed_rows(
    run_id: UUID, created_at: datetime, before: Mapping[str, str], after: Mapping[str, str]
) -> None:
    """Bring the run's ``RunTag`` rows from ``before`` to ``after``: delete the keys
    removed or changed, insert the keys added or changed (two statements at most)."""
    gone = [key for key, value in before.items() if after.get(key) != value]
    if gone:
        RunTag.objects.filter(run_id=run_id, key__in=gone).delete()
    write_start_tags(
        run_id,
        created_at,
        {key: value for key, value in after.items() if before.get(key) != value},
    )
