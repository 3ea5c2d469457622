"""The guides whose examples run: each guide's example files are executed here, as the
flows guide's are (:mod:`tests.project.test_flows_guide`): the ``<package>/flows.py``
blocks become the module ``<package>.flows``, and each ``test_*`` function of
``<package>/tests.py`` runs with the pytest fixtures it names.

- ``live-runs.md``: an export that reports as it goes (package ``exports``);
- ``loops.md``: a proposal that goes round its review, and a poll of a printer
  (package ``publishing``);
- ``concepts.md``: a catalogue import whose handler awaits a mapping (package
  ``catalogue``).
"""

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

GUIDES = Path(__file__).resolve().parents[2] / "docs" / "guide"
# guide → (its example's package, the fewest example tests it must hold)
EXAMPLES = {
    "live-runs.md": ("exports", 4),
    "loops.md": ("publishing", 6),
    "concepts.md": ("catalogue", 3),
}
FILES = {guide: example_files((GUIDES / guide).read_text()) for guide in EXAMPLES}
CASES = [
    (guide, name)
    for guide, (package, _) in EXAMPLES.items()
    for name in guide_test_names(FILES[guide][f"{package}/tests.py"])
]


@pytest.mark.parametrize("guide", EXAMPLES)
def test_the_guide_has_the_example_files_this_test_runs(guide: str):
    package, fewest = EXAMPLES[guide]
    assert set(FILES[guide]) == {f"{package}/flows.py", f"{package}/tests.py"}
    assert len(guide_test_names(FILES[guide][f"{package}/tests.py"])) >= fewest


@pytest.fixture
def example(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    guide = request.node.callspec.params["guide"]
    with imported_example(GUIDES / guide, FILES[guide], EXAMPLES[guide][0]) as namespace:
        yield namespace


@pytest.mark.django_db
@pytest.mark.parametrize(("guide", "name"), CASES)
def test_guide_example(
    guide: str, name: str, example: dict[str, Any], request: pytest.FixtureRequest
):
    run_guide_test(example[name], request)
