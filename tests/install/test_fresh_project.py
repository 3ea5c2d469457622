"""The wheel installs into a fresh Django project that is not Flowsite, and works there.

One test does what docs/install.md tells a team to do: build the wheel, install it with
the pinned dependencies into a new virtualenv, generate a project (``startproject shop``,
``startapp orders``), add the apps, settings and urls, migrate, check, define a workflow
in the new app's ``flows.py``, run it to completion with ``run_pending``, open the admin
and the API, and find no missing migrations. The project's files live in ``project/``
beside this module and are copied in, so the docs can quote them.

SQLite by default; PostgreSQL when the suite's ``DATABASE_URL`` points there, in a
database of its own named after the suite's test database and dropped afterwards.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import psycopg
import pytest
from django.conf import settings

from tests.acceptance.harness import database_url
from tests.support.wheel_build import ROOT, build_wheel

pytestmark = pytest.mark.acceptance

PROJECT_FILES = Path(__file__).resolve().parent / "project"
PIP_TIMEOUT_SECONDS = 300
COMMAND_TIMEOUT_SECONDS = 120
INDEX_PROBE_TIMEOUT_SECONDS = 10


# Where the installed package lives, found without importing it.
FIND_PACKAGE = (
    "import importlib.util; "
    "print(importlib.util.find_spec('workflows').submodule_search_locations[0])"
)


def run(
    args: list[str | Path], cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run one command of the install, bounded; return what it printed or fail with it."""
    result = subprocess.run(
        [str(arg) for arg in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(
            f"{' '.join(map(str, args))} exited with {result.returncode}:\n"
            f"{result.stdout}\n{result.stderr}"
        )
    return result


def require_package_index() -> None:
    """Skip when the package index cannot be reached, except under CI, where the test
    must not pass silently: it fails there and says why."""
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple/")
    try:
        with urllib.request.urlopen(index, timeout=INDEX_PROBE_TIMEOUT_SECONDS):
            return
    except (urllib.error.URLError, OSError) as exc:
        message = f"the install test needs the package index {index}, unreachable: {exc}"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def pinned_constraints(path: Path) -> Path:
    """The versions this suite runs with, of every package requirements.txt names, as a
    pip constraints file: the fresh project gets the Django (and the rest) of the
    combination under test, whichever the test matrix (noxfile.py) installed here."""
    names = (
        re.split(r"[\[=<>~! ]", line, maxsplit=1)[0]
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith(("#", "-"))
    )
    pins = []
    for name in names:
        try:
            pins.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:  # a linter the matrix does not install
            continue
    path.write_text("\n".join(pins) + "\n")
    return path


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A temporary directory removed afterwards: the venv in it weighs about 100 MB,
    more than pytest's kept tmp_path directories should hold."""
    path = Path(tempfile.mkdtemp(prefix="flowsite-install-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def project_database_url() -> Iterator[str]:
    """The DATABASE_URL of the fresh project: an SQLite file of its own by default (the
    project's settings choose it), or a PostgreSQL database named after the suite's test
    database, so concurrent suites never share one."""
    database = settings.DATABASES["default"]
    if not database["ENGINE"].endswith("postgresql"):
        yield ""
        return
    name = f"{database['TEST'].get('NAME') or 'test_' + database['NAME']}_fresh"[:63]
    server = {
        "host": database["HOST"] or None,
        "port": database["PORT"] or None,
        "user": database["USER"] or None,
        "password": database["PASSWORD"] or None,
        "dbname": "postgres",
    }
    drop = f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'
    with psycopg.connect(**server, autocommit=True) as connection:
        connection.execute(drop)
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield database_url({**database, "NAME": name})
    finally:
        with psycopg.connect(**server, autocommit=True) as connection:
            connection.execute(drop)


def test_wheel_runs_a_workflow_in_a_fresh_project(workdir: Path, project_database_url: str):
    require_package_index()
    wheel = build_wheel(workdir)
    venv = workdir / "venv"
    run([sys.executable, "-m", "venv", venv], workdir, dict(os.environ), COMMAND_TIMEOUT_SECONDS)
    python, django_admin = venv / "bin" / "python", venv / "bin" / "django-admin"
    passed_on = {  # the index, proxies and cache pip is configured with here
        key: value
        for key, value in os.environ.items()
        if key.startswith("PIP_") or key.lower().endswith("_proxy")
    }
    env = {
        **passed_on,
        "PATH": f"{venv / 'bin'}:{os.environ['PATH']}",
        "HOME": os.environ.get("HOME", str(workdir)),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "DATABASE_URL": project_database_url,
        "DJANGO_SETTINGS_MODULE": "shop.settings",
    }
    extra = "[postgres]" if project_database_url else ""
    constraints = pinned_constraints(workdir / "constraints.txt")
    pip_install = [python, "-m", "pip", "install", "--no-input", "--quiet"]
    run(
        [*pip_install, "--constraint", constraints, f"{wheel}{extra}"],
        workdir,
        env,
        PIP_TIMEOUT_SECONDS,
    )

    # PEP 561: type checkers of the project read the app's own type hints.
    typed = run(
        [python, "-c", FIND_PACKAGE],
        workdir,
        env,
        COMMAND_TIMEOUT_SECONDS,
    )
    assert (Path(typed.stdout.strip()) / "py.typed").is_file()

    project = workdir / "shop"
    project.mkdir()
    run([django_admin, "startproject", "shop", project], workdir, env, COMMAND_TIMEOUT_SECONDS)
    run([python, "manage.py", "startapp", "orders"], project, env, COMMAND_TIMEOUT_SECONDS)
    with (project / "shop" / "settings.py").open("a") as generated:
        generated.write("\n" + (PROJECT_FILES / "settings_workflows.py").read_text())
    shutil.copy(PROJECT_FILES / "urls.py", project / "shop" / "urls.py")
    for name in ("flows.py", "steps.py"):
        shutil.copy(PROJECT_FILES / "orders" / name, project / "orders" / name)
    shutil.copy(PROJECT_FILES / "smoke.py", project / "smoke.py")

    def manage(*args: str) -> str:
        result = run([python, "manage.py", *args], project, env, COMMAND_TIMEOUT_SECONDS)
        return result.stdout + result.stderr

    manage("migrate", "--no-input")
    manage("check")
    deploy = manage("check", "--deploy", "--fail-level", "CRITICAL")
    # The app's own checks and the schema's find nothing to say about these settings.
    assert not re.findall(r"\((?:workflows|drf_spectacular)\.[EW]\d+\)", deploy), deploy

    smoke = run([python, "smoke.py"], project, env, COMMAND_TIMEOUT_SECONDS)
    seen = json.loads(smoke.stdout)
    assert seen["run_status"] == "completed", seen
    assert seen["steps_run"] == 2
    assert seen["outputs"] == {
        "reserve": {"order_id": "A-1", "reserved": True},
        "confirm": {"confirmed": "A-1"},
    }
    pages = ("admin_login", "schema", "docs", "workflows")
    assert [seen[page] for page in pages] == [200] * len(pages), seen
    assert "checkout" in json.dumps(seen["workflows_body"])

    assert "No changes detected" in manage("makemigrations", "--check", "--dry-run")
