"""docs/guide/schedules.md runs: its example (a nightly report and a heartbeat) is
executed here, as the flows guide's is (:mod:`tests.project.test_flows_guide`): the
``# reports/flows.py`` blocks become the module ``reports.flows``, and each ``test_*``
function of the ``# reports/tests.py`` blocks runs with the fixtures it names."""

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

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "schedules.md"
PACKAGE = "reports"
FILES = example_files(GUIDE.read_text())
TESTS = f"{PACKAGE}/tests.py"


def test_the_guide_has_the_example_files_and_tests():
    assert set(FILES) == {f"{PACKAGE}/flows.py", TESTS}
    assert len(guide_test_names(FILES[TESTS])) >= 4


@pytest.fixture
def example() -> Iterator[dict[str, Any]]:
    with imported_example(GUIDE, FILES, PACKAGE) as namespace:
        yield namespace


@pytest.mark.django_db
@pytest.mark.parametrize("name", guide_test_names(FILES[TESTS]))
def test_guide_example(name: str, example: dict[str, Any], request: pytest.FixtureRequest):
    run_guide_test(example[name], request)
