"""A MkDocs hook that writes the generated parts of the reference into its pages.

A page line that is exactly one of the markers below is replaced by Markdown generated
from the code: the management commands from their parsers, the REST API from its
OpenAPI document, the events from the tables and functions that emit them. The site
then cannot say something the code no longer does. Django is set up once, on the first
page that needs it (``flowsite.settings`` unless ``DJANGO_SETTINGS_MODULE`` names
another).

MkDocs imports this file by path (and restores ``sys.path`` afterwards), so when a page
first needs them, this file's directory goes on ``sys.path`` for the generators beside it
(``reference_*.py``; docs/hooks/ is not a package of the app), and the checkout's root
for the app and the settings.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HOOKS = Path(__file__).resolve().parent
CHECKOUT = HOOKS.parents[1]


def _setup_django() -> None:
    """Set Django up once (the generators read the app's commands, URLs and models)."""
    for folder in (str(CHECKOUT), str(HOOKS)):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    from django.apps import apps

    if apps.ready:
        return
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flowsite.settings")
    import django

    django.setup()


def _commands() -> str:
    from reference_commands import commands_markdown

    return commands_markdown()


def _rest_api() -> str:
    from reference_rest_api import rest_api_markdown

    return rest_api_markdown()


def _events() -> str:
    from reference_events import events_markdown

    return events_markdown()


GENERATORS: dict[str, Callable[[], str]] = {
    "<!-- flowsite:commands -->": _commands,
    "<!-- flowsite:rest-api -->": _rest_api,
    "<!-- flowsite:events -->": _events,
}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """The page's Markdown with each marker line replaced by what it stands for."""
    lines = markdown.split("\n")
    if not any(line in GENERATORS for line in lines):
        return markdown
    _setup_django()
    return "\n".join(GENERATORS[line]() if line in GENERATORS else line for line in lines)
