"""The reference of the events an integration receives, as Markdown.

The history holds more events than these (each step's progress); the public ones are
the webhook event types (``workflows.webhooks.event_types``), which are also the events
the hooks (``workflows.hooks``) fire for. For each type the page names the hook it fires
and the arguments a receiver gets, computed by the hooks' own ``hook_for``; each hook's
docstring says what its event's payload holds. The webhook body and headers come from
the functions that build them (``workflows.webhooks.payload``, ``signing``). The code
keeps no table of payload keys per event type, so neither does the page.
"""

from __future__ import annotations

import ast
import itertools
import json
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID

from reference_markdown import anchor, cell, prose, table


def attribute_docstrings(path: Path) -> dict[str, str]:
    """The docstrings written under a module's assignments (``name = ...`` then a
    string), as documentation tools read them."""
    body = ast.parse(path.read_text()).body
    found = {}
    for statement, following in itertools.pairwise(body):
        if (
            isinstance(statement, ast.Assign)
            and isinstance(statement.targets[0], ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            found[statement.targets[0].id] = following.value.value
    return found


def hook_names() -> dict[object, str]:
    """Each hook (a Django signal of ``workflows.hooks``) → its name there."""
    from workflows import hooks

    return {signal: name for name, signal in vars(hooks).items() if signal in hooks.ALL_HOOKS}


def hook_of(webhook_type: str) -> tuple[str, list[str]] | None:
    """The hook an event of ``webhook_type`` fires and a receiver's keyword arguments."""
    from workflows.hooks import hook_for
    from workflows.models import Event
    from workflows.status import NodeKind

    if webhook_type == "gate.waiting":
        event = Event(type="step.waiting", payload={"reason": NodeKind.GATE})
    else:
        event = Event(type=webhook_type, payload={})
    found = hook_for(event)
    if found is None:
        return None
    signal, arguments = found
    return hook_names()[signal], ["sender", *arguments]


def hook_anchor(name: str) -> str:
    return anchor("hook", name)


def _types() -> list[str]:
    from workflows.webhooks.event_types import WEBHOOK_EVENT_TYPES

    rows = []
    for webhook_type in WEBHOOK_EVENT_TYPES:
        hook = hook_of(webhook_type)
        if hook is None:
            rows.append([f"`{webhook_type}`", "none", ""])
        else:
            name, arguments = hook
            rows.append(
                [
                    f"`{webhook_type}`",
                    f"[`{name}`](#{hook_anchor(name)})",
                    ", ".join(f"`{argument}`" for argument in arguments),
                ]
            )
    return [
        "## Event types",
        "",
        "What an endpoint may subscribe to (or `*` for all), and the hook each fires with "
        "the keyword arguments its receivers get.",
        "",
        *table(["Type", "Hook", "Receiver's arguments"], rows),
        "",
    ]


def _hooks() -> list[str]:
    from workflows import hooks

    docstrings = attribute_docstrings(Path(hooks.__file__))
    lines = [
        "## Hooks",
        "",
        prose(hooks.__doc__ or ""),
        "",
        "Each is `workflows.hooks.<name>`.",
        "",
    ]
    for name in sorted(hook_names().values()):
        lines += [f'<a id="{hook_anchor(name)}"></a>', "", f"### `{name}`", ""]
        lines += [prose(docstrings.get(name, "")), ""]
    return lines


def _webhook_body() -> list[str]:
    from workflows.webhooks import payload, signing

    body = payload.event_body(
        webhook_type="run.completed",
        event_id=1,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        run_id=UUID(int=1),
        step_id=None,
        step=None,
        workflow="a_workflow",
        payload={},
    )
    headers = signing.signed_headers(signing.generate_secret(), "msg_1", 0, payload.encode(body))
    return [
        "## Webhook requests",
        "",
        prose(payload.__doc__ or ""),
        "",
        "A body, with the event's own payload keys left out:",
        "",
        "```json",
        json.dumps(body, indent=2, sort_keys=True),
        "```",
        "",
        prose(signing.__doc__ or ""),
        "",
        *table(["Header"], [[f"`{cell(name)}`"] for name in headers]),
        "",
    ]


def events_markdown() -> str:
    """The event types, the hooks and the webhook requests."""
    return "\n".join([*_types(), *_hooks(), *_webhook_body()])
