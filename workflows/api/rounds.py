"""Every round of a step: ``GET /runs/{id}/steps/{name}/rounds/``.

Oldest first, a page at a time (signed cursors, as ``iterations/``): the ended rounds
(a rerun, a retry or a loop's next iteration started the step afresh), and on the last
page the step's current round (``"current": true``). Each with its attempts numbered
within it, its last progress, its summary and the ``seq`` range of its log frames
(``frames/?round=N`` reads them). An unknown run or step is a 404; reading needs
``workflows.view_run``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from workflows.api.pagination import InSequence
from workflows.models import Run
from workflows.queries.iterations import named_step
from workflows.queries.rounds import as_round, ended_rounds
from workflows.status import StepStatus

if TYPE_CHECKING:
    from rest_framework.views import APIView


class RoundSerializer(serializers.Serializer):
    """One round of a step: its attempts and the telemetry they reported."""

    round = serializers.IntegerField(help_text="1-based; each reset of the step starts one")
    generation = serializers.IntegerField()
    iteration = serializers.IntegerField(help_text="the loop iteration it ran in (1 outside)")
    status = serializers.ChoiceField(choices=StepStatus.choices, help_text="when it ended")
    attempt = serializers.IntegerField(help_text="attempts it made, numbered from 1")
    max_attempts = serializers.IntegerField(help_text="attempts it was allowed")
    progress_done = serializers.FloatField(allow_null=True)
    progress_total = serializers.FloatField(allow_null=True)
    progress_message = serializers.CharField(allow_blank=True)
    progress_at = serializers.DateTimeField(allow_null=True)
    summary = serializers.JSONField()
    summary_version = serializers.IntegerField()
    frames_after = serializers.IntegerField(help_text="its frames have a greater seq")
    frames_through = serializers.IntegerField(help_text="the seq of its last frame")
    frames_dropped = serializers.IntegerField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    ended_at = serializers.DateTimeField(allow_null=True, help_text="when the next began")
    current = serializers.BooleanField(help_text="the round the step holds now")


def step_rounds_page(request: Request, view: APIView, run: Run, step: str) -> Response:
    """The answer of ``GET /runs/{id}/steps/{name}/rounds/`` (see the module)."""
    found = named_step(run, step)
    paginator = InSequence()
    page = paginator.paginate_queryset(ended_rounds([found.pk]), request, view=view)
    rows = [as_round(row) for row in page or ()]
    if not paginator.has_next:
        rows.append(as_round(found))
    return paginator.get_paginated_response(
        RoundSerializer([row.as_dict() for row in rows], many=True).data
    )
