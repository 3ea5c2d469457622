"""``pip install .`` ships the reusable app, with its migrations and templates."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_contains_the_app_and_its_migrations(tmp_path):
    # Build from a clean copy: an in-tree build reuses build/ and could ship stale files.
    source = tmp_path / "source"
    shutil.copytree(
        ROOT / "workflows", source / "workflows", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "--wheel-dir",
            str(tmp_path),
            str(source),
        ],
        check=True,
        timeout=300,
        cwd=tmp_path,
    )
    (wheel,) = tmp_path.glob("flowsite_workflows-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "workflows/__init__.py" in names
    assert "workflows/migrations/0001_initial.py" in names
    assert "workflows/engine/scope.py" in names
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
