"""Signals and callbacks from the outside world: deliver a named signal to a run, and
resolve a task parked on a callback token."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from workflows.definitions import Task, WaitForSignal, registry
from workflows.engine.created import Created, value_of
from workflows.engine.nodes.callback import resolve_callback
from workflows.engine.nodes.wait_for_signal import send_signal_once as deliver_signal_once
from workflows.errors import (
    DefinitionMissing,
    UnknownSignal,
)
from workflows.models import Run, Signal
from workflows.queries import get_run
from workflows.tracing import note_decision
from workflows.validation import check_json, check_text, max_length

if TYPE_CHECKING:
    from workflows.permissions import AnyUser


def send_signal_once(
    run: Run | UUID | str,
    name: str,
    payload: Any = None,
    *,
    idempotency_key: str | None = None,
    user: AnyUser | None = None,
) -> Created[Signal]:
    """Send signal ``name`` to a run; kept until a ``WaitForSignal`` step consumes it.

    ``user``, when given, is recorded in the run's history as who sent it.

    Refused before anything is written: a name no ``WaitForSignal`` step of the run's
    definition waits for (:class:`UnknownSignal`, listing the names it does wait for),
    and a name, key or payload the database cannot store (:class:`InvalidInput`).

    Returns :class:`~workflows.engine.created.Created`: the signal, and whether this call
    created it (decided by the insert that won: of racing sends with one key exactly one
    says ``created``). :func:`send_signal` returns the signal alone.
    """
    target = run if isinstance(run, Run) else get_run(run)
    check_signal(target, name, payload, idempotency_key)
    sent = deliver_signal_once(
        target.pk,
        name,
        payload,
        idempotency_key=idempotency_key,
        sent_by=user.get_username() if user is not None else None,
    )
    note_decision(
        "workflow.signal",
        lambda: target.traceparent,
        lambda: {
            "flowsite.run.id": str(target.pk),
            "flowsite.signal.name": name,
            "flowsite.signal.created": sent.created,
        },
    )
    return sent


send_signal = value_of(
    send_signal_once,
    "send_signal",
    """Send signal ``name`` to a run; return the signal. Everything else as
    :func:`send_signal_once`, which also says whether this call created it.""",
)


def check_signal(run: Run, name: str, payload: Any, idempotency_key: str | None) -> None:
    """Refuse, before anything is written, a signal ``run`` would never consume or the
    database cannot store: what ``send_signal`` and ``send_signal_with_token`` check."""
    check_text(name, field="signal name", limit=max_length(Signal, "name"))
    if idempotency_key is not None:
        check_text(
            idempotency_key,
            field="signal idempotency key",
            limit=max_length(Signal, "idempotency_key"),
        )
    check_json(payload, field="signal payload")
    waited_for = signals_waited_for(run)
    if name not in waited_for:
        raise UnknownSignal(
            f"run {run.pk} of {run.workflow_name!r} v{run.workflow_version} never "
            f"waits for signal {name!r}; "
            + (
                f"it waits for {', '.join(repr(known) for known in waited_for)}"
                if waited_for
                else "it waits for no signal"
            ),
            run=str(run.pk),
            signal=name,
            waits_for=waited_for,
        )


def signals_waited_for(run: Run) -> list[str]:
    """The signal names the ``WaitForSignal`` steps of the run's pinned definition wait for,
    and those its tasks declare they may await (``Task(awaits=[...])``).

    Read from the registered (name, version); for a run whose definition is not
    registered here, from the graph snapshot stored on the run, and if that does not
    list its steps' kinds, :class:`DefinitionMissing` is raised.
    """
    try:
        definition = registry.get(run.workflow_name, run.workflow_version)
    except DefinitionMissing:
        return _signals_in_snapshot(run)
    names: list[str] = []
    for node in definition.nodes.values():
        if isinstance(node, WaitForSignal):
            names.append(node.signal)
        elif isinstance(node, Task):
            names.extend(node.awaits)
    return list(dict.fromkeys(names))


def _signals_in_snapshot(run: Run) -> list[str]:
    steps = run.snapshot.get("steps") if isinstance(run.snapshot, dict) else None
    if not (
        isinstance(steps, list)
        and all(
            isinstance(step, dict)
            and isinstance(step.get("kind"), str)
            and (step["kind"] != WaitForSignal.kind or isinstance(step.get("signal"), str))
            and isinstance(step.get("awaits", []), list)
            for step in steps
        )
    ):
        raise DefinitionMissing(
            f"workflow {run.workflow_name!r} v{run.workflow_version} of run {run.pk} is not "
            "registered in this process and the run's snapshot does not list its steps' "
            "kinds, so the signals it waits for are unknown",
            workflow=run.workflow_name,
            version=run.workflow_version,
        )
    return list(
        dict.fromkeys(
            name
            for step in steps
            for name in (
                [step["signal"]] if step["kind"] == WaitForSignal.kind else step.get("awaits", [])
            )
        )
    )


def complete_callback(token: str, output: Any = None) -> None:
    """Resolve a parked task with ``output``; a bad, expired or reused token is refused.

    ``output`` is checked as a handler's output is; :class:`InvalidInput` if the
    database cannot store it, and nothing is written.
    """
    check_json(output, field="callback output")
    resolve_callback(token, output=output)


def fail_callback(token: str, error: str) -> None:
    """Fail the attempt a callback token names (retried per the task's policy).

    ``error`` is a string the database can store, else :class:`InvalidInput`.
    """
    check_text(error, field="callback error")
    resolve_callback(token, error=error or "callback failed")
