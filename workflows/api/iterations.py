"""Every iteration of a step a loop ran again: ``GET /runs/{id}/steps/{name}/iterations/``.

Oldest first, a page at a time as the project's lists are (signed cursors, ``page_size``
checked): the finished iterations in the order they were archived, and on the last page
the step's current iteration after them (``"current": true``), so a client that follows
``next`` to its end has them all. A step no loop ran again answers its one current
iteration. An unknown run or step is a 404; reading needs ``workflows.view_run``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from workflows.api.pagination import InSequence
from workflows.models import Run
from workflows.queries.iterations import (
    archived_iterations,
    as_iteration,
    named_step,
)
from workflows.status import Decision, DecisionVia, FailureClass, StepStatus

if TYPE_CHECKING:
    from rest_framework.views import APIView


class IterationSerializer(serializers.Serializer):
    """One iteration of a step: its outcome, and its gate's decision for a gate."""

    iteration = serializers.IntegerField(help_text="1-based; a loop's body counts on")
    generation = serializers.IntegerField(help_text="the step's generation that ran it")
    status = serializers.ChoiceField(choices=StepStatus.choices)
    attempt = serializers.IntegerField(help_text="attempts it took")
    output = serializers.JSONField(allow_null=True)
    error = serializers.JSONField(allow_null=True)
    failure_class = serializers.ChoiceField(choices=FailureClass.choices, allow_blank=True)
    decision = serializers.ChoiceField(
        choices=Decision.choices, allow_blank=True, help_text="a gate's: blank until decided"
    )
    decided_via = serializers.ChoiceField(choices=DecisionVia.choices, allow_blank=True)
    decided_by = serializers.CharField(allow_null=True, help_text="the decider's username")
    decided_at = serializers.DateTimeField(allow_null=True)
    feedback = serializers.CharField(allow_blank=True)
    selections = serializers.JSONField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    current = serializers.BooleanField(help_text="the iteration the step holds now")


def step_iterations_page(request: Request, view: APIView, run: Run, step: str) -> Response:
    """The answer of ``GET /runs/{id}/steps/{name}/iterations/`` (see the module)."""
    found = named_step(run, step)
    paginator = InSequence()
    page = paginator.paginate_queryset(archived_iterations([found.pk]), request, view=view)
    rows = [as_iteration(row, current=False) for row in page or ()]
    if not paginator.has_next:
        rows.append(as_iteration(found, current=True))
    return paginator.get_paginated_response(
        IterationSerializer([row.as_dict() for row in rows], many=True).data
    )
