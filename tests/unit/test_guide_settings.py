"""docs/reference/settings.md documents every WORKFLOWS key with its real default.

The page's tables hold one key per row, ``| `KEY` | `default` | meaning |``, the default
written as the Python value of ``workflows.conf.DEFAULTS``. A key added to DEFAULTS
without a row fails here, and so does a row whose default no longer matches the code.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

from workflows.conf import DEFAULTS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "settings.md"
ROW = re.compile(r"^\| `(?P<key>[A-Z][A-Z0-9_]*)` \| `(?P<default>[^`]*)` \|", re.MULTILINE)


def documented(markdown: str) -> dict[str, str]:
    """Map each key in the page's tables to its default as written."""
    rows: dict[str, str] = {}
    for match in ROW.finditer(markdown):
        assert match["key"] not in rows, f"{match['key']} is documented twice"
        rows[match["key"]] = match["default"]
    return rows


def value_of(default: str) -> object:
    """The Python value a default column spells (literals, arithmetic, timedelta)."""
    return eval(default, {"__builtins__": {}, "timedelta": timedelta})


def test_the_parser_reads_rows():
    page = "| key | default | meaning |\n| `A_KEY` | `timedelta(seconds=2)` | why |\n"
    assert documented(page) == {"A_KEY": "timedelta(seconds=2)"}
    assert value_of("1024 * 1024") == 1_048_576


def test_every_setting_is_documented():
    rows = documented(PAGE.read_text())
    missing = sorted(set(DEFAULTS) - set(rows))
    assert not missing, f"docs/reference/settings.md does not document {missing}"


def test_every_documented_default_is_the_real_one():
    rows = documented(PAGE.read_text())
    wrong = {
        key: (written, DEFAULTS[key])
        for key, written in rows.items()
        if key in DEFAULTS and value_of(written) != DEFAULTS[key]
    }
    assert not wrong, f"docs/reference/settings.md has wrong defaults (page, code): {wrong}"
