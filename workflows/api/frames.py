"""A step's log frames over HTTP: ``GET /runs/{id}/steps/{step}/frames/``.

``{step}`` is the step's name (or its id). ``after=C`` answers the frames after the
frame ``C`` (the ``seq`` of the last one the client received; absent: from the first),
oldest first, at most ``limit``, of one ``stream`` when given, of the step's current
round unless ``round=N`` names an ended one (a rerun, a retry or a loop's next iteration
starts the step with no frames). ``next_after`` is the
cursor to send next (the last frame's ``seq``, or ``after`` again when there was none),
and ``dropped`` how many frames the per-attempt bound has trimmed so far, so a client
can say that the log it shows is not whole. Bad values are a 400 naming the parameter;
an unknown run or step a 404. Reading needs ``workflows.view_run``.

``wait=S`` makes it a long poll (:mod:`workflows.api.long_poll`): with no frame after
the cursor yet, it answers as soon as the step's next frames commit (topic
``frames:<step id>``), or after ``S`` seconds with none.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from workflows.api.long_poll import (
    WAIT_PARAMETER,
    checked_query,
    timed_out,
    timed_out_field,
    wait_seconds,
    waiting,
)
from workflows.errors import StepNotFound
from workflows.models import Run
from workflows.queries.frames import (
    DEFAULT_FRAMES_LIMIT,
    MAX_FRAMES_LIMIT,
    MAX_SEQ,
    frames,
    frames_dropped,
)
from workflows.queries.long_poll import long_poll
from workflows.services.targets import step_in_run
from workflows.status import FrameStream

FRAME_PARAMETERS = [
    OpenApiParameter(
        "after",
        OpenApiTypes.INT,
        description="only frames after this seq (the last one the client received; "
        "absent: from the first)",
    ),
    OpenApiParameter(
        "limit",
        OpenApiTypes.INT,
        description=f"frames at most, 1 to {MAX_FRAMES_LIMIT} (default {DEFAULT_FRAMES_LIMIT})",
    ),
    OpenApiParameter(
        "stream", OpenApiTypes.STR, enum=FrameStream.values, description="only this stream"
    ),
    OpenApiParameter(
        "round",
        OpenApiTypes.INT,
        description="the frames of this round of the step (absent: its current round; "
        "every round at .../rounds/)",
    ),
    WAIT_PARAMETER,
]


class FramesQuerySerializer(serializers.Serializer):
    """The query string of ``GET /runs/{id}/steps/{step}/frames/``."""

    after = serializers.IntegerField(required=False, min_value=0, max_value=MAX_SEQ, default=None)
    limit = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_FRAMES_LIMIT, default=DEFAULT_FRAMES_LIMIT
    )
    stream = serializers.ChoiceField(choices=FrameStream.choices, required=False, default=None)
    round = serializers.IntegerField(required=False, min_value=1, max_value=MAX_SEQ, default=None)


class FrameSerializer(serializers.Serializer):
    seq = serializers.IntegerField(help_text="the frame's number in its step: the cursor")
    attempt = serializers.IntegerField(help_text="the attempt that wrote it")
    stream = serializers.ChoiceField(choices=FrameStream.choices)
    text = serializers.CharField(allow_blank=True)
    at = serializers.DateTimeField(help_text="when the handler logged it")


class FramePageSerializer(serializers.Serializer):
    frames = FrameSerializer(many=True)
    next_after = serializers.IntegerField(
        allow_null=True, help_text="send as after= next; null: no frame yet and no after given"
    )
    dropped = serializers.IntegerField(help_text="frames trimmed by the per-attempt bound so far")
    timed_out = timed_out_field()


def step_frames_page(request: Request, run: Run, step: str) -> Response:
    """The answer of ``GET /runs/{id}/steps/{step}/frames/`` (see the module)."""
    query = checked_query(request, FramesQuerySerializer)
    wait_seconds(request)  # a bad wait is a 400 before the step is looked up
    if not (step.isascii() and (step.isidentifier() or step.isdigit())):
        # Step names are identifiers and ids digits: anything else (a NUL, which
        # PostgreSQL refuses in a parameter) names no step.
        raise StepNotFound(f"run {run.pk} has no step {step!r}", step=step)
    found = step_in_run(run, step)
    with waiting(request) as seconds:
        page = long_poll(
            [f"frames:{found.pk}"],
            lambda: frames(
                found,
                after=query["after"],
                limit=query["limit"],
                stream=query["stream"],
                round=query["round"],
            ),
            until=bool,
            timeout=seconds,
        )
    if seconds:
        found.refresh_from_db(fields=["frames_dropped"])  # trimmed meanwhile, maybe
    return Response(
        {
            "frames": FrameSerializer([frame.as_dict() for frame in page], many=True).data,
            "next_after": page[-1].seq if page else query["after"],
            "dropped": frames_dropped(found, query["round"]),
            "timed_out": timed_out(seconds, bool(page)),
        }
    )
