"""The ``Workflow`` base class: a workflow is a subclass whose attributes are its steps."""

from __future__ import annotations

from typing import Any, ClassVar

from workflows.definitions.graph import Graph
from workflows.definitions.nodes import Node
from workflows.errors import DefinitionError, InvalidInput


class Workflow:
    """Base class of workflow definitions.

    Subclasses are validated and registered when the class statement runs, so a broken
    definition fails at import time with an error naming the workflow and the step. Pass
    ``register=False`` in the class statement to validate without registering.
    """

    name: ClassVar[str] = ""
    version: ClassVar[int] = 1
    nodes: ClassVar[dict[str, Node]] = {}
    graph: ClassVar[Graph]

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
        cls.validate()
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
        if not isinstance(cls.name, str) or not cls.name.strip():
            found.append(f"{cls.label()}: name must be a non-empty string")
        if not isinstance(cls.version, int) or isinstance(cls.version, bool) or cls.version < 1:
            found.append(f"{cls.label()}: version must be an integer >= 1, got {cls.version!r}")
        for step, messages in cls.graph.problems().items():
            where = f"{cls.label()}, step {step!r}" if step else cls.label()
            found.extend(f"{where}: {message}" for message in messages)
        for step, node in cls.nodes.items():
            found.extend(f"{cls.label()}, step {step!r}: {m}" for m in node.problems())
        return found

    @classmethod
    def validate(cls) -> None:
        """Raise :class:`DefinitionError` listing every problem, if there are any."""
        found = cls.problems()
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
            "steps": [
                {"name": name, "after": list(cls.graph.upstream[name]), **node.describe()}
                for name, node in cls.nodes.items()
            ],
        }
