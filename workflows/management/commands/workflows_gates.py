"""List the gates waiting for a decision, oldest first."""

from __future__ import annotations

from typing import Any

from workflows.approvals import gates_for, waiting_gates
from workflows.management.arguments import user_named
from workflows.management.base import DeclaredCommand
from workflows.management.options import json_option, user_option
from workflows.management.output import table, to_json

COLUMNS = {
    "step": "STEP",
    "name": "GATE",
    "run": "RUN",
    "business_key": "BUSINESS KEY",
    "prompt": "PROMPT",
    "waiting_since": "WAITING SINCE",
    "due_at": "DUE",
    "claimed_by": "CLAIMED BY",
}


class Command(DeclaredCommand):
    help = (
        "List the gates waiting for a decision, oldest first: step id, gate, run, business "
        "key, prompt, when it started waiting, when it times out and who claimed it. With "
        "--user U, only the gates U may decide; without, every waiting gate."
    )

    arguments = (
        user_option("username: only the gates this user may decide"),
        json_option("the gates"),
    )

    def handle(self, *args: Any, **options: Any) -> None:
        username = options["user"]
        gates = gates_for(user_named(username)) if username else waiting_gates()
        if options["json"]:
            self.stdout.write(to_json(gates))
        elif gates:
            rows = ([getattr(gate, key) for key in COLUMNS] for gate in gates)
            self.stdout.write(table(COLUMNS.values(), rows))
        else:
            self.stdout.write(
                f"no gates waiting for {username}" if username else "no gates waiting"
            )
