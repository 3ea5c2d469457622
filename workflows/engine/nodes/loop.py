"""Loop nodes: when reached, go round the body again, or complete, or give up.

Entering a loop node asks its ``while_`` (``ctx.iteration`` is the round that just
ended). False completes the node. True starts the body's next iteration
(:func:`~workflows.engine.loops.iterations.start_next_iteration`), moves the loop
node's own round on (it stays pending until the body reaches it again) and enters
``back_to`` in the same transition. Past ``max_iterations`` rounds, ``on_exhausted``
fails the run with ``max_iterations_exceeded`` or completes the node
(:mod:`workflows.engine.loops.bounds`).
"""

from __future__ import annotations

from workflows.definitions import Loop
from workflows.engine.advance import Advancer, enters
from workflows.engine.loops.bounds import ran_out
from workflows.engine.loops.iterations import start_next_iteration
from workflows.engine.sql.expressions import db_now
from workflows.engine.sql.rows import StepRow, step_rows
from workflows.engine.sql.updates import cas_update
from workflows.errors import StaleState
from workflows.models import Step
from workflows.status import StepStatus


@enters(Loop)
def enter_loop(advancer: Advancer, row: StepRow, node: Loop) -> str:
    try:
        again = bool(node.while_(advancer.context_for(row)))
    except Exception as exc:
        return advancer.fail_entering(row, exc, "condition_error")
    run = advancer.run
    if not again:
        return advancer.complete(
            row, {"iterations": row.iteration, "exhausted": False}, iterations=row.iteration
        )
    if row.iteration >= node.max_iterations:
        if ran_out(advancer, row, node.on_exhausted, "loop"):
            return StepStatus.FAILED
        return advancer.complete(
            row, {"iterations": row.iteration, "exhausted": True}, iterations=row.iteration
        )
    body = advancer.workflow.graph.loop_bodies[row.name]
    start_next_iteration(step_rows(run.pk, body), advancer.workflow)
    if not cas_update(
        Step,
        row.pk,
        version=row.version,
        where={"status": StepStatus.PENDING},
        iteration=row.iteration + 1,
        updated_at=db_now(),
    ):
        raise StaleState(f"loop {row.name!r} of run {run.pk} changed while going round")
    row.version, row.iteration = row.version + 1, row.iteration + 1
    advancer.events.add(
        run.pk,
        "loop.iterated",
        step_id=row.pk,
        iteration=row.iteration,
        back_to=node.back_to,
        body=list(body),
    )
    advancer.forget_context()
    advancer.release([node.back_to])
    return StepStatus.PENDING
