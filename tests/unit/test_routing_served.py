"""``routes_served``: the django-q2 clusters a worker listens on for its queues and
capabilities, from the plain queues and the routes of registered workflows."""

from __future__ import annotations

import pytest

from tests.support.handlers import NOOP
from workflows import FanOut, Task, Workflow
from workflows.definitions import registry
from workflows.definitions.limits import Route
from workflows.engine.routing import routes_served


class Render(Workflow, register=False):
    name = "served_render"
    fetch = Task(NOOP)
    draw = Task(NOOP, queue="gpu", requires={"cuda"})
    upscale = FanOut(NOOP, items=lambda ctx: [1], queue="gpu", requires={"cuda", "fp16"})


class RenderV2(Workflow, register=False):
    """A newer version: its routes count too, as do those of runs still on v1."""

    name = "served_render"
    version = 2
    default_requires = frozenset({"avx512"})
    fetch = Task(NOOP)
    mail = Task(NOOP, queue="emails", requires=set())


@pytest.fixture(autouse=True)
def registered(monkeypatch):
    monkeypatch.setattr(registry, "all", lambda: [Render, RenderV2])


def keys(routes: list[Route]) -> list[str | None]:
    return [route.key for route in routes]


def test_each_served_queue_is_a_cluster_with_the_default_queue_first():
    assert keys(routes_served(["gpu", "default", "emails"], [])) == [None, "emails", "gpu"]


def test_routes_requiring_capabilities_are_served_only_with_all_of_them():
    assert keys(routes_served(["gpu"], ["cuda"])) == ["gpu", "gpu+cuda"]
    assert keys(routes_served(["gpu"], ["cuda", "fp16"])) == ["gpu", "gpu+cuda", "gpu+cuda+fp16"]
    assert keys(routes_served(["gpu"], ["fp16"])) == ["gpu"]


def test_routes_of_every_registered_version_count():
    assert keys(routes_served(["default"], ["avx512"])) == [None, "default+avx512"]
    assert keys(routes_served(["default", "emails"], [])) == [None, "emails"]


def test_a_queue_no_workflow_uses_is_still_served():
    """Work can be routed to it by a definition deployed after the worker started."""
    assert keys(routes_served(["reports"], ["cuda"])) == ["reports"]


def test_a_worker_serving_no_queue_has_no_route():
    assert routes_served([], ["cuda"]) == []


def test_every_route_served_is_one_the_worker_may_run():
    queues, capabilities = ["default", "gpu"], ["cuda", "fp16", "avx512"]
    routes = routes_served(queues, capabilities)
    assert all(route.served_by(queues, capabilities) for route in routes)
    used = {*Render.routes(), *RenderV2.routes()}
    assert {route for route in used if route.queue != "emails"} <= set(routes)
