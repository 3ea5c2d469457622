"""Who may decide a gate, and the gates waiting for a given person.

The rule is written once, as a filter on :class:`~workflows.models.Step`
(:func:`decidable_by`): the services check one gate with it before a decision or a
claim, and :func:`gates_for` lists every gate it lets a user decide in one query, so
the two can never disagree. Nothing here writes, and nothing opens a transaction (see
:mod:`workflows.queries`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db.models import (
    BooleanField,
    Exists,
    Expression,
    F,
    Func,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
)
from django.db.models.functions import Concat

from workflows.definitions import Gate
from workflows.engine.sql.json_arrays import array_rows
from workflows.models import Run, Step, Timer
from workflows.permissions import OVERRIDE_GATE_CLAIM, OVERRIDE_GATE_RULE
from workflows.status import RUN_ALIVE, StepStatus, TimerKind, TimerStatus

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.db.models.sql.compiler import SQLCompiler, _AsSqlType

    from workflows.permissions import AnyUser

# Waiting gates a page counts before it says "more than" (the inbox, the sidebar, the
# dashboard).
GATE_COUNT_CAP = 1_000


class _Listed(Func):
    """``assignees[key]`` lists one of ``names`` (without ``names``: lists anyone).

    ``names`` is one value or a subquery of values: ``EXISTS`` over the array's rows
    (:mod:`workflows.engine.sql.json_arrays`), so the test runs in the database.
    """

    conditional = True
    output_field = BooleanField()

    def __init__(self, key: str, names: Value | Subquery | None = None) -> None:
        super().__init__(F("assignees"), *([names] if names is not None else []))
        self.key = key

    def as_sql(
        self,
        compiler: SQLCompiler,
        connection: BaseDatabaseWrapper,
        function: str | None = None,
        template: str | None = None,
        arg_joiner: str | None = None,
        **extra_context: Any,
    ) -> _AsSqlType:
        column, column_params = compiler.compile(self.source_expressions[0])
        rows, params = array_rows(column, column_params, connection.vendor, key=self.key)
        sql = f"EXISTS (SELECT 1 FROM {rows}"
        if len(self.source_expressions) > 1:
            names: Expression = self.source_expressions[1]
            names_sql, names_params = compiler.compile(names)
            # A compiled subquery comes in parentheses already; a value does not.
            test = "IN" if isinstance(names, Subquery) else "="
            sql += f" WHERE listed.value {test} {names_sql}"
            params = [*params, *names_params]
        return f"{sql})", params


def signed_in(user: AnyUser) -> bool:
    """Whether ``user`` is someone at all: signed in and active."""
    return (
        user is not None
        and getattr(user, "is_authenticated", False)
        and getattr(user, "is_active", False)
    )


def decidable_by(user: AnyUser) -> Q:
    """The gates ``user`` may decide, as a filter on steps: the one rule of deciders.

    A gate naming a permission, users or groups accepts whoever holds the permission
    or is listed by username or by one of their groups; a gate naming none of them
    accepts any signed-in user. Superusers may decide every gate; anonymous and
    inactive users none. Permissions are the user's own and their groups' in Django's
    permission tables, what ``ModelBackend.has_perm`` consults; they and the group names
    are subqueries of the same statement, so the rule costs no query of its own and
    never one per gate.
    """
    if not signed_in(user):
        return Q(pk__in=[])
    if getattr(user, "is_superuser", False):
        return Q()
    permissions = (
        Permission.objects.filter(
            Q(pk__in=user.user_permissions.values("pk")) | Q(group__in=user.groups.values("pk"))
        )
        .annotate(dotted=Concat("content_type__app_label", Value("."), "codename"))
        .values("dotted")
    )
    groups = user.groups.values("name")
    return (
        (Q(permission="") & ~Q(_Listed("users")) & ~Q(_Listed("groups")))
        | Q(_Listed("users", Value(user.get_username())))
        | Q(permission__in=Subquery(permissions))
        | Q(_Listed("groups", Subquery(groups)))
    )


def may_override_claim(user: AnyUser) -> bool:
    """Whether ``user`` may decide or release a gate that someone else has claimed."""
    return signed_in(user) and user.has_perm(OVERRIDE_GATE_CLAIM)


def may_override_rule(user: AnyUser) -> bool:
    """Whether ``user`` may skip a gate whose rule does not admit them, as an override."""
    return signed_in(user) and user.has_perm(OVERRIDE_GATE_RULE)


@dataclass(frozen=True)
class WaitingGate:
    """One gate waiting for a decision, as an approvals list shows it.

    ``waiting_since`` is when the gate started waiting; ``due_at`` when its timeout
    fires (``None``: it waits for ever); ``claimed_by`` the username of whoever claimed
    it (``None``: nobody); ``iteration`` the round of the loop the gate is in (1: its
    first, or no loop).
    """

    step: int
    name: str
    run: str
    workflow: str
    business_key: str
    prompt: str
    waiting_since: datetime | None
    due_at: datetime | None
    claimed_by: str | None
    claimed_at: datetime | None
    iteration: int


def _waiting_steps(steps: QuerySet[Step]) -> QuerySet[Step]:
    """The waiting gates of live runs among ``steps``.

    The run's status is an ``EXISTS`` on its primary key rather than a join condition:
    joined, SQLite starts from the (many) live runs and probes each one's steps; this
    way every database starts from the partial index of waiting steps, in its order.
    """
    live = Run.objects.filter(pk=OuterRef("run_id"), status__in=RUN_ALIVE)
    return steps.filter(Exists(live), kind=Gate.kind, status=StepStatus.WAITING)


def _waiting(steps: QuerySet[Step], limit: int | None = None) -> list[WaitingGate]:
    """Run the approvals query: waiting gates of live runs, oldest first (the first
    ``limit`` of them), in one SELECT.

    The due time is a subquery on the gate's scheduled timeout timer and the claimer's
    name a join, so the cost does not grow with the number of gates beyond the rows
    themselves (the partial index ``workflows_step_waiting_gate`` finds them). A page
    passes ``limit``: thousands of waiting gates are thousands of rows to build and
    render, where a person reads the oldest.
    """
    due = Timer.objects.filter(
        step_id=OuterRef("pk"), kind=TimerKind.GATE_TIMEOUT, status=TimerStatus.SCHEDULED
    ).order_by("due_at")
    claimer = f"claimed_by__{get_user_model().USERNAME_FIELD}"
    rows = (
        _waiting_steps(steps)
        .annotate(due_at=Subquery(due.values("due_at")[:1]))
        .order_by("started_at", "id")
        .values_list(
            "id",
            "name",
            "run_id",
            "run__workflow_name",
            "run__business_key",
            "prompt",
            "started_at",
            "due_at",
            claimer,
            "claimed_at",
            "iteration",
        )
    )
    return [
        WaitingGate(pk, name, str(run), workflow, key, prompt, since, due_at, by, at, iteration)
        for pk, name, run, workflow, key, prompt, since, due_at, by, at, iteration in (
            rows if limit is None else rows[:limit]
        )
    ]


def waiting_gates(limit: int | None = None) -> list[WaitingGate]:
    """Every gate waiting for a decision, oldest first (the first ``limit``): an
    operator's view."""
    return _waiting(Step.objects.all(), limit)


@dataclass(frozen=True)
class GateCount:
    """How many gates wait, counted up to a cap: ``number`` (at most the cap) and whether
    ``more`` wait. Shown as the number, or "more than <cap>"; false when none waits."""

    number: int
    more: bool

    def __bool__(self) -> bool:
        return self.more or self.number > 0

    def __str__(self) -> str:
        return f"more than {self.number}" if self.more else str(self.number)


def count_waiting_gates(user: AnyUser | None, cap: int | None = None) -> GateCount:
    """How many gates wait for ``user`` (:func:`decidable_by`; every gate for ``None``),
    up to ``cap`` (:data:`GATE_COUNT_CAP` by default).

    One ``COUNT`` of at most ``cap + 1`` entries of the partial index of waiting gates,
    for the pages that show a number and not the gates (every admin page's sidebar
    shows one): thousands of waiting gates are not read to print a number.
    """
    steps = Step.objects.all() if user is None else Step.objects.filter(decidable_by(user))
    cap = GATE_COUNT_CAP if cap is None else cap
    counted = _waiting_steps(steps).order_by().values("pk")[: cap + 1].count()
    return GateCount(min(counted, cap), counted > cap)


def gates_for(
    user: AnyUser, limit: int | None = None, among: Collection[int] | None = None
) -> list[WaitingGate]:
    """The waiting gates ``user`` may decide (:func:`decidable_by`), oldest first: the
    first ``limit``, of the steps ``among`` when given (those a page lists).

    Gates someone else claimed are listed too, with their claimer: the user sees who
    holds them. One query for the gates, plus the user's permissions and groups.
    """
    steps = Step.objects.filter(decidable_by(user))
    return _waiting(steps if among is None else steps.filter(pk__in=among), limit)
