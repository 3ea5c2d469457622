"""docs/guide/loops.md runs: its example (a proposal that goes round its review, and a
poll of a printer) is executed here, as the flows guide's is
(:mod:`tests.project.test_flows_guide`): the ``publishing/flows.py`` blocks become the
module ``publishing.flows``, and each ``test_*`` function of ``publishing/tests.py``
runs with the pytest fixtures it names."""

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

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "loops.md"
PACKAGE = "publishing"
FILES = example_files(GUIDE.read_text())


def test_the_guide_has_the_example_files_this_test_runs():
    assert set(FILES) == {f"{PACKAGE}/flows.py", f"{PACKAGE}/tests.py"}
    assert len(guide_test_names(FILES[f"{PACKAGE}/tests.py"])) >= 6


@pytest.fixture
def example() -> Iterator[dict[str, Any]]:
    with imported_example(GUIDE, FILES, PACKAGE) as namespace:
        yield namespace


@pytest.mark.django_db
@pytest.mark.parametrize("name", guide_test_names(FILES[f"{PACKAGE}/tests.py"]))
def test_guide_example(name: str, example: dict[str, Any], request: pytest.FixtureRequest):
    run_guide_test(example[name], request)
