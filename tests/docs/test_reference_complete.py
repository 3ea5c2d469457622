"""The reference documents the whole public API: every name of ``workflows.__all__`` has
its ``::: workflows.<name>`` directive on a page of ``docs/reference/``, which
mkdocstrings renders from the code's signature and docstring (``make docs``). A name
added to ``__all__`` without a directive fails here; one removed from the code fails the
site's strict build instead, since its directive no longer imports."""

from __future__ import annotations

import re
from pathlib import Path

import workflows

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference"
DIRECTIVE = re.compile(r"^::: (?P<path>[\w.]+)\s*$", re.MULTILINE)


def directives(markdown: str) -> list[str]:
    """The dotted paths of a page's mkdocstrings directives, in page order."""
    return [match["path"] for match in DIRECTIVE.finditer(markdown)]


def documented_names() -> list[str]:
    """The ``workflows.<name>`` directives of every reference page."""
    return [
        path.removeprefix("workflows.")
        for page in sorted(REFERENCE.glob("*.md"))
        for path in directives(page.read_text())
        if path.count(".") == 1 and path.startswith("workflows.")
    ]


def test_the_parser_reads_directives():
    page = "# API\n\n::: workflows.start_run\n    options:\n      heading_level: 3\n\ntext\n"
    assert directives(page) == ["workflows.start_run"]


def test_every_public_name_is_in_the_reference():
    missing = sorted(set(workflows.__all__) - set(documented_names()))
    assert not missing, f"docs/reference/ has no '::: workflows.<name>' for {missing}"


def test_the_reference_names_only_public_names_once_each():
    names = documented_names()
    assert len(names) == len(set(names)), "a name is documented twice"
    assert set(names) <= set(workflows.__all__)


def test_the_handler_context_has_its_page():
    page = (REFERENCE / "context.md").read_text()
    assert "workflows.context.Context" in directives(page)
