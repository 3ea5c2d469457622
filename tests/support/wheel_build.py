"""Build the app's wheel the way a release does, for the tests that inspect or install it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD_TIMEOUT_SECONDS = 300


def build_wheel(destination: Path) -> Path:
    """Build ``flowsite-workflows`` into ``destination`` and return the wheel's path.

    The build runs on a clean copy of the files the wheel is made from: an in-tree build
    reuses ``build/`` and could ship stale files. No build isolation and no download: the
    suite's own setuptools and wheel (pinned in requirements.txt) build it.
    """
    source = destination / "source"
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
            str(destination),
            str(source),
        ],
        check=True,
        timeout=BUILD_TIMEOUT_SECONDS,
        cwd=destination,
    )
    (wheel,) = destination.glob("flowsite_workflows-*.whl")
    return wheel
