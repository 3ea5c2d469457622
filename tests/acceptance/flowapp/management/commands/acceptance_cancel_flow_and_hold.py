"""Cancel a flow and stop dead between its close and its members' cancellation.

``cancel_flow`` commits the flow's close (its policy, reason and actor stored); then,
where it would cancel the members, this command writes ``MARKER`` and sleeps until it
is killed: the crash test kills it there with SIGKILL, as a process dying at that exact
moment, and the recovery scanner must finish the cancellation.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from unittest import mock
from uuid import UUID

from django.core.management.base import BaseCommand

from workflows.engine.flows import cancellation


class Command(BaseCommand):
    help = "Cancel FLOW with POLICY, then hold (MARKER written) before any member is cancelled."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("flow")
        parser.add_argument("policy")
        parser.add_argument("marker")
        parser.add_argument("--reason", default="")

    def handle(self, *args: Any, flow: str, policy: str, marker: str, reason: str, **_: Any):
        def hold(flow_id: UUID) -> bool:
            Path(marker).write_text(str(flow_id))
            while True:
                time.sleep(1)

        with mock.patch.object(cancellation, "cancel_members", hold):
            cancellation.cancel_flow(UUID(flow), policy, reason=reason)
