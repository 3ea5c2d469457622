"""``pip install .`` ships the reusable app, with its migrations and templates."""

from __future__ import annotations

import zipfile

import pytest

from tests.support.wheel_build import ROOT, build_wheel


@pytest.mark.processes
def test_wheel_contains_the_app_and_its_migrations(tmp_path):
    wheel = build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    assert "workflows/__init__.py" in names
    assert "workflows/migrations/0001_initial.py" in names
    assert "workflows/engine/scope.py" in names
    assert "workflows/py.typed" in names  # PEP 561: its type hints are for its users too
    shipped = {name for name in names if name.startswith("workflows/") and name.endswith(".py")}
    in_tree = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "workflows").rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert shipped == in_tree
    assert not [name for name in names if name.startswith(("flowsite/", "tests/", "bench/"))]
    metadata = next(name for name in names if name.endswith("METADATA"))
    requires = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "Requires-Dist: Django>=5.2" in requires
    assert "Requires-Python: >=3.11" in requires
