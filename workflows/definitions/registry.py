"""The registry of every workflow (name, version) known to this process."""

from __future__ import annotations

from django.utils.module_loading import autodiscover_modules

from workflows.conf import workflow_settings
from workflows.definitions.workflow import Workflow
from workflows.errors import DefinitionError, DefinitionMissing


class Registry:
    """Maps (name, version) to a :class:`Workflow` subclass."""

    def __init__(self) -> None:
        self._workflows: dict[tuple[str, int], type[Workflow]] = {}

    def register(self, workflow: type[Workflow]) -> type[Workflow]:
        """Add ``workflow``; a different class under the same (name, version) is an error.

        Re-registering the class of the same module and qualified name replaces the old
        one, so reloading a module does not fail.
        """
        workflow.validate()
        key = (workflow.name, workflow.version)
        existing = self._workflows.get(key)
        if existing is not None and _origin(existing) != _origin(workflow):
            raise DefinitionError(
                f"{workflow.label()} is already registered by {_origin(existing)}; "
                f"{_origin(workflow)} must use another name or version",
                workflow=workflow.name,
                version=workflow.version,
            )
        self._workflows[key] = workflow
        return workflow

    def unregister(self, name: str, version: int) -> None:
        self._workflows.pop((name, version), None)

    def get(self, name: str, version: int) -> type[Workflow]:
        """Return the exact (name, version), or raise :class:`DefinitionMissing`."""
        try:
            return self._workflows[(name, version)]
        except KeyError:
            raise DefinitionMissing(
                f"workflow {name!r} v{version} is not registered in this process",
                workflow=name,
                version=version,
            ) from None

    def latest(self, name: str) -> type[Workflow]:
        """Return the highest registered version of ``name``."""
        versions = [version for (known, version) in self._workflows if known == name]
        if not versions:
            raise DefinitionMissing(f"no workflow named {name!r} is registered", workflow=name)
        return self._workflows[(name, max(versions))]

    def resolve(self, workflow: str | type[Workflow]) -> type[Workflow]:
        """Accept a registered name (latest version) or a registered class."""
        if isinstance(workflow, str):
            return self.latest(workflow)
        if isinstance(workflow, type) and issubclass(workflow, Workflow):
            return self.get(workflow.name, workflow.version)
        raise TypeError(f"expected a workflow name or Workflow subclass, got {workflow!r}")

    def all(self) -> list[type[Workflow]]:
        return [self._workflows[key] for key in sorted(self._workflows)]


def _origin(workflow: type[Workflow]) -> str:
    return f"{workflow.__module__}.{workflow.__qualname__}"


registry = Registry()


def autodiscover() -> None:
    """Import the ``flows`` module (see ``AUTODISCOVER_MODULE``) of every installed app."""
    autodiscover_modules(workflow_settings.AUTODISCOVER_MODULE)
