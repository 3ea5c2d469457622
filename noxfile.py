"""The test matrix: every supported Django on every Python it supports.

``make test`` runs the default combination (Python 3.11, Django 5.2 LTS, the pins of
requirements.txt) and CI runs it on SQLite and PostgreSQL. This file adds the suite on
SQLite for each other supported combination, with the app installed from its own
ranges (pyproject.toml), so the versions of djangorestframework, django-q2,
drf-spectacular and django-filter are those a new project on that combination gets.

    nox -l                                          # the sessions
    nox -s "tests(python='3.12', django='6.1')"     # one combination
    nox -s next_django                              # the next Django's pre-release, if any
    make test-matrix                                # every combination but the default

Extra arguments after ``--`` go to pytest: ``nox -s "tests(...)" -- -x tests/engine``.

CI (``.ci/run``) runs the sessions tagged ``bounds`` (``nox -t bounds``): every
supported Python and every supported Django at least once, with the default
combination's run. Django 6.1 runs on its oldest and newest Python (3.12, 3.13);
Django 5.2 LTS runs on 3.11 in the default combination, on both databases. The
combinations between (3.12 and 3.13 under Django 5.2) are left to ``make test-matrix``:
a failure on one of them alone would be Django's or Python's, not a version this app
meets nowhere else, and each session costs CI 4 to 5 minutes of its 45.
CI passes ``-- -m "not acceptance and not
slow"``: the default combination has run the real-process and scale tests on both
databases by then. Each session runs pytest on every core, as ``make test`` does.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import nox

DEFAULT = ("3.11", "5.2")
"""The combination of requirements.txt, the one ``make test`` and the linters use."""

SUPPORTED = [
    ("3.11", "5.2"),
    ("3.12", "5.2"),
    ("3.13", "5.2"),
    ("3.12", "6.1"),
    ("3.13", "6.1"),
]
"""Django 5.2 LTS supports Python 3.10 to 3.13, Django 6.1 Python 3.12 and later; the app
needs 3.11. Keep pyproject.toml's classifiers and the README's table in step."""

XDIST = ["-n", "auto", "--maxprocesses=4", "--dist", "loadgroup"]
"""As ``make test`` runs the suite: one pytest worker per core (see the Makefile)."""

NEXT_DJANGO = ("3.13", "6.2")
"""The release after the newest supported one: tested on its pre-release while one is out."""

BOUNDS = [("3.12", "6.1"), ("3.13", "6.1")]
"""The combinations CI runs besides the default: with it, every supported Python and Django."""

nox.options.default_venv_backend = "venv"
nox.options.error_on_missing_interpreters = True
nox.options.sessions = [
    f"tests(python='{python}', django='{django}')"
    for python, django in SUPPORTED
    if (python, django) != DEFAULT
] + ["next_django"]


def _runs(interpreter: str | None) -> bool:
    """Whether ``interpreter`` starts (a pyenv shim of a version not selected does not)."""
    if not interpreter:
        return False
    started = subprocess.run([interpreter, "-c", ""], capture_output=True, check=False)
    return started.returncode == 0


def _expose_interpreters() -> None:
    """Put each Python the matrix needs on ``PATH`` by its usual name, ``python3.X``.

    nox finds interpreters by that name. pyenv (as on the CI machine) answers it only for
    the versions selected, so an installed 3.12 or 3.13 stays out of sight; a link to it
    in ``.nox/interpreters`` makes it visible, and nothing else on ``PATH`` changes.
    """
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    links = Path(__file__).parent / ".nox" / "interpreters"
    for version in sorted({python for python, _ in SUPPORTED} | {NEXT_DJANGO[0]}):
        name = f"python{version}"
        if _runs(shutil.which(name)):
            continue
        installed = [
            path
            for path in sorted(root.glob(f"versions/{version}.*/bin/{name}"))
            if _runs(str(path))
        ]
        if installed:
            links.mkdir(parents=True, exist_ok=True)
            (links / name).unlink(missing_ok=True)
            (links / name).symlink_to(installed[-1])
    if links.is_dir():
        os.environ["PATH"] = f"{links}{os.pathsep}{os.environ['PATH']}"


_expose_interpreters()


def _install_app(session: nox.Session, django: str, *, pre: bool = False) -> None:
    """The app from its own ranges with the extras the suite uses, on ``django``."""
    session.install("-r", "requirements-test.txt")
    session.install(
        *(["--pre"] if pre else []),
        f"Django~={django}.0{'a1' if pre else ''}",
        ".[postgres,redis,metrics,otel]",
    )


def _pytest(session: nox.Session) -> None:
    """The suite on SQLite: a DATABASE_URL of the caller's would run it elsewhere."""
    env = {"DATABASE_URL": "", "FLOWSITE_VAR_DIR": f"{session.virtualenv.location}/var"}
    session.run("python", "-m", "django", "--version")
    session.run("python", "-m", "pytest", *XDIST, *session.posargs, env=env)


@nox.session
@nox.parametrize(
    ("python", "django"),
    [
        nox.param(python, django, tags=["bounds"] if (python, django) in BOUNDS else [])
        for python, django in SUPPORTED
    ],
)
def tests(session: nox.Session, django: str) -> None:
    """The whole suite on SQLite on one supported combination."""
    if (session.python, django) == DEFAULT:
        session.install("-r", "requirements.txt")
    else:
        _install_app(session, django)
    _pytest(session)


@nox.session(python=NEXT_DJANGO[0], tags=["bounds"])
def next_django(session: nox.Session) -> None:
    """The suite on the next Django's pre-release, while one is published; else nothing."""
    python = session.virtualenv.location + "/bin/python"
    found = subprocess.run(
        [python, "-m", "pip", "index", "versions", "--pre", "Django"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    published = re.findall(r"\b(\d+\.\d+)(?:a|b|rc|\.|\b)", found.partition("versions:")[2])
    if NEXT_DJANGO[1] not in published:
        session.skip(f"no pre-release of Django {NEXT_DJANGO[1]} is published yet")
    _install_app(session, NEXT_DJANGO[1], pre=True)
    _pytest(session)
