"""Committing an attempt's changes to its run's variables, with its result.

A handler's ``ctx.set_variables(patch)`` calls are kept on its lease
(``Lease.variable_patches``) and written here, inside the transition that records the
attempt's outcome (a completion, a batch's completions, a parking behind an await or a
callback), after the attempt's fenced write matched and before anything else moves on.
So the patches are fenced exactly like the result: an attempt that fails, times out, is
revoked or lost its lease never reaches this point and writes no variables.

No lock of its own, and no merge in SQL: the transition holds the run (its lock on
PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite), so reading the committed variables, merging
in Python and compare-and-setting the run (its status and version) cannot interleave
with another writer. Of two parallel branches writing one key, the later commit wins;
each commit is a ``run.variables_set`` event naming the step and the attempt, so the
history says who wrote what, in commit order. An attempt that set nothing costs nothing.
"""

from __future__ import annotations

from workflows.engine.lease import Lease
from workflows.engine.runs import update_locked_run
from workflows.engine.scope import RunScope
from workflows.errors import PermanentError
from workflows.models import Run
from workflows.variables import patched, size_problem


class VariablesRefused(PermanentError):
    """The attempt's patches would take the run's variables past their size limit, as
    committed by now (a parallel branch may have grown them since the handler checked):
    the attempt fails for good and writes nothing, its result included."""


def commit_variables(scope: RunScope, lease: Lease) -> None:
    """Apply ``lease``'s pending patches to its run, in the caller's transition, after
    the attempt's fenced write matched; nothing when it has none.

    Raises :class:`VariablesRefused` when the result is past ``MAX_VARIABLES_BYTES``:
    the caller's transaction rolls back (the fenced write with it) and the worker
    records the attempt as failed for good.
    """
    patches = lease.variable_patches
    if not patches:
        return
    run = scope.run
    committed = Run.objects.filter(pk=run.pk).values_list("variables", flat=True).get()
    variables = patched(committed or {}, patches)
    problem = size_problem(variables, field="the run's variables")
    if problem is not None:
        raise VariablesRefused(f"{lease.label} attempt {lease.attempt_in_round}: {problem}")
    update_locked_run(run, "its variables were written", variables=variables)
    scope.events.add(run.pk, "run.variables_set", **lease.writer(), patches=patches)
