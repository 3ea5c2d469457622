"""Markdown pieces the reference generators share: prose from docstrings and help
texts, table cells and tables, anchors."""

from __future__ import annotations

import inspect
import re
from collections.abc import Sequence

# Sphinx roles and literals of the app's docstrings, which become Markdown code.
ROLE = re.compile(r":\w+:`~?([^`]+)`")
LITERAL = re.compile(r"``([^`]+)``")
CODE = re.compile(r"(`[^`]*`)")


def prose(text: str) -> str:
    """A docstring or help text as Markdown: its roles and literals as code, and outside
    code the characters Markdown would read as HTML, emphasis or a link escaped."""
    text = ROLE.sub(lambda match: f"`{match[1].rsplit('.', 1)[-1]}`", inspect.cleandoc(text))
    text = LITERAL.sub(r"`\1`", text)
    return "".join(
        part
        if CODE.fullmatch(part)
        else part.replace("<", "&lt;").replace("*", "\\*").replace("[", "\\[")
        for part in CODE.split(text)
    )


def cell(text: object) -> str:
    """Text that stays in one table cell: one line, its pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table's lines."""
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def anchor(*parts: str) -> str:
    """An id made of ``parts``: lower case letters, digits and dashes."""
    return re.sub(r"[^a-z0-9]+", "-", "-".join(parts).lower()).strip("-")
