"""The MkDocs hook of the reference pages (docs/hooks/reference.py) writes, for each
marker, Markdown that names everything its source holds: every management command of
the app with its own options, every operation of the API's served schema and every
schema it names, every event type and hook. Compared with the sources themselves, so a
command, a route or an event type added without appearing on the site fails here."""

from __future__ import annotations

import argparse
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest
from django.core.management import load_command_class
from django.core.management.base import BaseCommand

from tests.api.schema_doc import api_schema
from workflows import hooks
from workflows.webhooks.event_types import WEBHOOK_EVENT_TYPES

HOOK = Path(__file__).resolve().parents[2] / "docs" / "hooks" / "reference.py"
COMMANDS = Path(__file__).resolve().parents[2] / "workflows" / "management" / "commands"
LINK = re.compile(r"\]\(#([^)]+)\)")
ANCHOR = re.compile(r'<a id="([^"]+)"></a>')


@pytest.fixture(scope="module")
def hook() -> ModuleType:
    """The hook, imported by path as MkDocs imports it."""
    spec = importlib.util.spec_from_file_location("flowsite_reference_hook", HOOK)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def generated(hook: ModuleType, marker: str) -> str:
    page = f"# Title\n\nBefore.\n\n<!-- flowsite:{marker} -->\n\nAfter.\n"
    text = hook.on_page_markdown(page, page=None, config=None, files=None)
    assert text.startswith("# Title\n\nBefore.\n\n") and text.endswith("\n\nAfter.\n")
    assert f"flowsite:{marker}" not in text
    return text


def assert_links_resolve(text: str) -> None:
    """Every in-page link has its anchor, and no anchor is written twice."""
    anchors = ANCHOR.findall(text)
    assert len(anchors) == len(set(anchors))
    assert set(LINK.findall(text)) <= set(anchors)


def test_a_page_without_a_marker_is_left_alone(hook: ModuleType):
    page = "# Commands\n\nSay `<!-- flowsite:commands -->` to list them.\n"
    assert hook.on_page_markdown(page, page=None, config=None, files=None) == page


def own_options(parser: argparse.ArgumentParser, shared: set[str]) -> list[str]:
    """The first option string of each option a parser has beyond Django's own."""
    return [
        action.option_strings[0]
        for action in parser._actions
        if action.option_strings and action.dest not in shared
    ]


def test_every_command_is_listed_with_its_own_options(hook: ModuleType):
    text = generated(hook, "commands")
    names = sorted(path.stem for path in COMMANDS.glob("workflows_*.py"))
    assert len(names) >= 30
    assert re.findall(r"^## `(\w+)`$", text, re.MULTILINE) == names
    shared = {action.dest for action in BaseCommand().create_parser("manage.py", "x")._actions}
    for name in names:
        parser = load_command_class("workflows", name).create_parser("manage.py", name)
        section = text.split(f"## `{name}`\n", 1)[1].split("\n## `", 1)[0]
        parsers = {name: parser}
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers |= {f"{name} {sub}": subparser for sub, subparser in action.choices.items()}
        for heading, each in parsers.items():
            part = section if heading == name else section.split(f"### `{heading}`\n", 1)[1]
            for option in own_options(each, shared):
                assert f"`{option}" in part, (heading, option)


@pytest.mark.django_db
def test_every_operation_and_schema_of_the_served_api_is_described(hook: ModuleType):
    text = generated(hook, "rest-api")
    schema = api_schema()
    for path, item in schema["paths"].items():
        for method in item:
            if method in ("get", "post", "put", "patch", "delete"):
                assert f"### `{method.upper()} {path}`" in text
    for name in schema["components"]["schemas"]:
        assert f'<a id="schema-{name.lower()}"></a>' in text
    assert_links_resolve(text)


def test_every_event_type_and_hook_is_described(hook: ModuleType):
    text = generated(hook, "events")
    for event_type in WEBHOOK_EVENT_TYPES:
        assert f"| `{event_type}` |" in text
    names = [name for name, value in vars(hooks).items() if value in hooks.ALL_HOOKS]
    assert len(names) == len(hooks.ALL_HOOKS)
    for name in names:
        section = text.split(f"### `{name}`\n", 1)[1].split("\n#", 1)[0]
        assert len(section.split()) > 5, f"{name} has no description"
    assert '"type": "run.completed"' in text
    assert "`webhook-signature`" in text
    assert_links_resolve(text)
