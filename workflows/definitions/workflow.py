"""The ``Workflow`` base class: a workflow is a subclass whose attributes are its steps."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, ClassVar

from workflows.definitions.deadline import deadline_problems
from workflows.definitions.graph import Graph
from workflows.definitions.limits import (
    DEFAULT_QUEUE,
    Budget,
    Route,
    name_problems,
    priority_problems,
)
from workflows.definitions.nodes import LeasedNode, Node
from workflows.definitions.schedules.spec import ScheduleSpec
from workflows.errors import DefinitionError, InvalidInput


def example_problems(example: Any) -> list[str]:
    """What is wrong with an ``input_example``: it must be ``None`` or a JSON object."""
    if example is None:
        return []
    if not isinstance(example, dict):
        return [f"input_example must be a JSON object (a dict), got {type(example).__name__}"]
    try:
        json.dumps(example, allow_nan=False)
    except (TypeError, ValueError) as error:
        return [f"input_example must be JSON: {error}"]
    return []


class Workflow:
    """Base class of workflow definitions.

    Subclasses are validated and registered when the class statement runs, so a broken
    definition fails at import time with an error naming the workflow and the step. Pass
    ``register=False`` in the class statement to validate without registering.

    Routing and limits of the whole workflow (``docs/guide/routing.md``):
    ``default_queue`` and ``default_requires`` route its leased steps that name none;
    ``default_priority`` is a run's priority unless ``start_run(priority=)`` says;
    ``max_concurrent_runs`` caps its active runs (the rest wait ``queued``, oldest
    first); ``budgets`` limit the usage its handlers report.

    ``deadline`` (a positive ``timedelta``, or ``None``): each run must have ended that
    long after its start, or it fails with ``deadline_exceeded`` and compensates;
    ``start_run(deadline=...)`` gives one run another (``docs/guide/concepts.md``).

    ``unique_business_key`` (default ``False``): no two live runs of this workflow hold
    one business key; a start or a ``set_business_key`` naming a key a live run holds is
    refused with :class:`~workflows.errors.BusinessKeyInUse`, decided by a partial
    unique index (``docs/guide/run-metadata.md``). Ended runs release their key.

    ``schedules``: ``Schedule.cron(...)`` and ``Schedule.every(...)`` declarations that
    start runs of this workflow on a calendar, installed by ``migrate`` and at worker
    start (``docs/guide/schedules.md``); :meth:`declared_schedules` gives them keyed.
    """

    name: ClassVar[str] = ""
    version: ClassVar[int] = 1
    default_queue: ClassVar[str] = DEFAULT_QUEUE
    default_requires: ClassVar[frozenset[str] | set[str]] = frozenset()
    default_priority: ClassVar[int] = 0
    max_concurrent_runs: ClassVar[int | None] = None
    deadline: ClassVar[timedelta | None] = None
    unique_business_key: ClassVar[bool] = False
    budgets: ClassVar[Sequence[Budget]] = ()
    schedules: ClassVar[Sequence[ScheduleSpec]] = ()
    input_example: ClassVar[dict[str, Any] | None] = None
    nodes: ClassVar[dict[str, Node]] = {}
    graph: ClassVar[Graph]
    _routes: ClassVar[dict[str, Route]] = {}

    def __init_subclass__(cls, register: bool = True, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        found = [
            (name, value)
            for klass in reversed(cls.__mro__)
            for name, value in vars(klass).items()
            if isinstance(value, Node)
        ]
        cls.nodes = dict(sorted(found, key=lambda pair: pair[1].declaration_index))
        cls.graph = Graph.from_nodes(cls.nodes)
        # Through Workflow's own methods: a step named after one of them (``label``,
        # ``validate``) shadows it on ``cls``, and must be reported, not crash the check.
        Workflow.validate.__func__(cls)  # type: ignore[attr-defined]
        cls._routes = {step: cls._declared_route(step) for step in cls.nodes}
        if register:
            from workflows.definitions.registry import registry

            registry.register(cls)

    @classmethod
    def label(cls) -> str:
        return f"workflow {cls.name or cls.__qualname__!r} v{cls.version}"

    @classmethod
    def problems(cls) -> list[str]:
        """Return every problem of this definition, each naming the workflow and step."""
        found: list[str] = []
        label = Workflow.label.__func__  # type: ignore[attr-defined]  # see __init_subclass__
        if not isinstance(cls.name, str) or not cls.name.strip():
            found.append(f"{label(cls)}: name must be a non-empty string")
        if not isinstance(cls.version, int) or isinstance(cls.version, bool) or cls.version < 1:
            found.append(f"{label(cls)}: version must be an integer >= 1, got {cls.version!r}")
        for step, messages in cls.graph.problems().items():
            where = f"{label(cls)}, step {step!r}" if step else label(cls)
            found.extend(f"{where}: {message}" for message in messages)
        for step, node in cls.nodes.items():
            found.extend(f"{label(cls)}, step {step!r}: {m}" for m in node.problems())
            if step in vars(Workflow):
                found.append(
                    f"{label(cls)}, step {step!r}: the name is an attribute of Workflow; "
                    "call the step something else"
                )
        found.extend(f"{label(cls)}: {m}" for m in cls._limit_problems())
        found.extend(f"{label(cls)}: {m}" for m in example_problems(cls.input_example))
        return found

    @classmethod
    def _limit_problems(cls) -> list[str]:
        found = name_problems("default_queue", cls.default_queue)
        if not isinstance(cls.default_requires, set | frozenset):
            found.append(f"default_requires must be a set, got {cls.default_requires!r}")
        else:
            for capability in sorted(cls.default_requires):
                found.extend(name_problems("each of default_requires", capability))
        found.extend(priority_problems(cls.default_priority))
        limit = cls.max_concurrent_runs
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 1
        ):
            found.append(f"max_concurrent_runs must be an integer >= 1 or None, got {limit!r}")
        if cls.deadline is not None:
            found.extend(deadline_problems(cls.deadline, moment_allowed=False))
        dimensions: set[tuple[str, str]] = set()
        for budget in cls.budgets:
            if not isinstance(budget, Budget):
                found.append(f"budgets must hold Budget(...) values, got {budget!r}")
                continue
            found.extend(budget.problems())
            if (budget.dimension, budget.per) in dimensions:
                found.append(f"budget {budget.dimension!r} per {budget.per} is declared twice")
            dimensions.add((budget.dimension, budget.per))
        found.extend(cls._schedule_problems())
        return found

    @classmethod
    def _schedule_problems(cls) -> list[str]:
        if not isinstance(cls.schedules, list | tuple):
            return [
                f"schedules must be a list of Schedule.cron(...) or Schedule.every(...), "
                f"got {cls.schedules!r}"
            ]
        keys: set[str] = set()
        for declared in cls.schedules:
            if not isinstance(declared, ScheduleSpec):
                return [
                    f"schedules must hold Schedule.cron(...) or Schedule.every(...), "
                    f"got {declared!r}"
                ]
            try:
                key = declared.with_default_key(cls.name).key
            except InvalidInput as exc:
                return [f"schedule {declared.key or declared.cron or declared.every}: {exc}"]
            if key in keys:
                return [f"schedule {key!r} is declared twice; give one a key of its own"]
            keys.add(key)
        return []

    @classmethod
    def declared_schedules(cls) -> list[ScheduleSpec]:
        """The ``schedules`` of this class, each with its workflow and key."""
        return [declared.with_default_key(cls.name) for declared in cls.schedules]

    @classmethod
    def route_of(cls, step: str) -> Route:
        """Where the leased step ``step`` runs: its own queue and requirements, or the
        workflow's defaults. Worked out once, when the class is created: every claim and
        every chained step asks."""
        return cls._routes[step]

    @classmethod
    def _declared_route(cls, step: str) -> Route:
        node = cls.nodes[step]
        queue = getattr(node, "queue", None) or cls.default_queue
        requires = getattr(node, "requires", None)
        return Route(
            queue,
            frozenset(cls.default_requires if requires is None else requires),
            external=getattr(node, "external", False),
        )

    @classmethod
    def routes(cls) -> set[Route]:
        """Every route this workflow's leased steps use."""
        return {cls.route_of(step) for step, n in cls.nodes.items() if isinstance(n, LeasedNode)}

    @classmethod
    def priority_of(cls, step: str, run_priority: int) -> int:
        """The priority of ``step``'s work: its own, or else its run's."""
        own = getattr(cls.nodes[step], "priority", None)
        return run_priority if own is None else own

    @classmethod
    def unit_columns(
        cls, step: str, run_priority: int, *, compensation: bool = False
    ) -> dict[str, Any]:
        """The routing columns of a unit of ``step``'s work (step, item, compensation).

        A compensation is Python work, even of an external step: it runs on the
        step's queue in process."""
        route = cls.route_of(step)
        if compensation:
            route = route.in_process()
        return {
            "queue": route.queue,
            "requires": route.requires_text,
            "priority": cls.priority_of(step, run_priority),
        }

    @classmethod
    def validate(cls) -> None:
        """Raise :class:`DefinitionError` listing every problem, if there are any."""
        found = Workflow.problems.__func__(cls)  # type: ignore[attr-defined]
        if found:
            raise DefinitionError("; ".join(found), workflow=cls.name, problems=found)

    @classmethod
    def clean_input(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Validate and normalise a run's input; override and raise ``InvalidInput``.

        Called by ``start_run`` before anything is written.
        """
        return data

    @classmethod
    def check_input(cls, data: Any) -> dict[str, Any]:
        """Check the generic shape of input, then apply :meth:`clean_input`."""
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise InvalidInput(
                f"input of {cls.label()} must be a JSON object, got {type(data).__name__}"
            )
        return cls.clean_input(data)

    @classmethod
    def snapshot(cls) -> dict[str, Any]:
        """Return the JSON description of the graph stored on each run."""
        return {
            "name": cls.name,
            "version": cls.version,
            "default_queue": cls.default_queue,
            "default_requires": sorted(cls.default_requires),
            "max_concurrent_runs": cls.max_concurrent_runs,
            **({"deadline": cls.deadline.total_seconds()} if cls.deadline is not None else {}),
            "budgets": [budget.describe() for budget in cls.budgets],
            "steps": [
                {"name": name, "after": list(cls.graph.upstream[name]), **node.describe()}
                for name, node in cls.nodes.items()
            ],
        }
