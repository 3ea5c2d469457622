"""The README's ten-line example runs: its ``greetings/flows.py`` block becomes the
module ``greetings.flows`` and each ``test_*`` of its ``greetings/tests.py`` block runs
here, as the guides' examples do (:mod:`tests.project.test_flows_guide`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.project.test_flows_guide import (
    example_files,
    guide_test_names,
    imported_example,
    run_guide_test,
)

README = Path(__file__).resolve().parents[2] / "README.md"
PACKAGE = "greetings"
FILES = example_files(README.read_text())


def test_the_readme_holds_one_example_of_two_files():
    assert set(FILES) == {f"{PACKAGE}/flows.py", f"{PACKAGE}/tests.py"}
    assert len((FILES[f"{PACKAGE}/flows.py"] + FILES[f"{PACKAGE}/tests.py"]).splitlines()) <= 25


@pytest.fixture
def example() -> Iterator[dict[str, Any]]:
    with imported_example(README, FILES, PACKAGE) as namespace:
        yield namespace


@pytest.mark.django_db
@pytest.mark.parametrize("name", guide_test_names(FILES[f"{PACKAGE}/tests.py"]))
def test_readme_example(name: str, example: dict[str, Any], request: pytest.FixtureRequest):
    run_guide_test(example[name], request)
