"""The rules of ``workflows/engine/sql/`` (see its package docstring), pinned.

Read from the source with ``ast``: no module imports a private name of the package, no
module of the engine outside the package holds SQL statement text, no value is
formatted between quotes into SQL text in the engine, and only ``identifiers.py`` turns
a model's metadata into a table name.
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import FieldDoesNotExist

import workflows
from workflows.engine.sql import claim_reads
from workflows.engine.sql.identifiers import column, status_literal, table
from workflows.models import FanOutItem, Run, Step
from workflows.status import StepStatus

APP = Path(workflows.__file__).parent
ROOT = APP.parent
ENGINE = APP / "engine"
SQL_PACKAGE = ENGINE / "sql"


def _sources() -> list[Path]:
    return [
        path
        for folder in ("workflows", "tests", "bench")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "migrations" not in path.parts
    ]


def _private_sql_imports(tree: ast.Module) -> list[str]:
    return [
        f"{node.module}.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and node.module
        and node.module.startswith("workflows.engine.sql")
        for alias in node.names
        if alias.name.startswith("_")
    ]


def _quoted_values(tree: ast.Module) -> list[int]:
    """Lines of f-strings that put a formatted value between single quotes (``'{x}'``):
    a value formatted into SQL text."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.JoinedStr):
            continue
        parts = node.values
        for before, value in itertools.pairwise(parts):
            if (
                isinstance(before, ast.Constant)
                and str(before.value).endswith("'")
                and isinstance(value, ast.FormattedValue)
            ):
                lines.append(node.lineno)
    return lines


# Text that starts a statement (``SELECT …``, ``(SELECT …``), or holds one of its clauses
# further in (``… EXISTS (SELECT 1 FROM …``). Uppercase only: SQL is written so here,
# prose ("Update the counter") is not.
_STATEMENT_START = re.compile(r"\s*\(?\s*(SELECT|UPDATE|INSERT|DELETE|WITH)\s")
_STATEMENT_CLAUSE = re.compile(
    r"\b(SELECT\s.*\sFROM|UPDATE\s.*\sSET|INSERT\s+INTO|DELETE\s+FROM)\s", re.DOTALL
)


def _docstrings(tree: ast.Module) -> set[int]:
    """The ``id`` of every docstring's node: prose, which may quote a statement."""
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def _literal_text(node: ast.AST) -> str | None:
    """A string constant's text, or an f-string's with ``{}`` for each formatted value."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            str(part.value) if isinstance(part, ast.Constant) else "{}" for part in node.values
        )
    return None


def _sql_statements(tree: ast.Module) -> list[int]:
    """Lines of string constants and f-strings (docstrings aside) holding SQL statement
    text."""
    docstrings = _docstrings(tree)
    return sorted(
        {
            node.lineno
            for node in ast.walk(tree)
            if id(node) not in docstrings
            and (text := _literal_text(node)) is not None
            and (_STATEMENT_START.match(text) or _STATEMENT_CLAUSE.search(text))
        }
    )


def _findings(paths: Iterable[Path], check: Callable[[ast.Module], list[Any]]) -> dict[str, Any]:
    """Each of ``paths`` in which ``check`` finds something in the syntax tree, with what
    it found."""
    return {
        str(path.relative_to(ROOT)): found
        for path in paths
        if (found := check(ast.parse(path.read_text())))
    }


def test_no_module_imports_a_private_name_of_the_sql_package():
    sources = [path for path in _sources() if path.exists()]  # a file moved away meanwhile
    assert _findings(sources, _private_sql_imports) == {}


def test_every_statement_of_the_engine_lives_in_the_sql_package():
    engine = [path for path in sorted(ENGINE.rglob("*.py")) if SQL_PACKAGE not in path.parents]
    assert _findings(engine, _sql_statements) == {}


def test_no_engine_module_formats_a_value_between_quotes():
    assert _findings(sorted(ENGINE.rglob("*.py")), _quoted_values) == {}


def test_only_identifiers_reads_a_table_name_from_a_model():
    found = [
        str(path.relative_to(ROOT))
        for path in sorted(ENGINE.rglob("*.py"))
        if "db_table" in path.read_text() and path.name != "identifiers.py"
    ]
    assert found == []


def test_the_checks_see_what_they_look_for():
    tree = ast.parse("from workflows.engine.sql.connection import _TRANSITION_DB, engine_alias")
    assert _private_sql_imports(tree) == ["workflows.engine.sql.connection._TRANSITION_DB"]
    assert _quoted_values(ast.parse("sql = f\"WHERE status = '{status}'\"")) == [1]
    assert _quoted_values(ast.parse('sql = f"WHERE status = %s AND {column}"')) == []
    statements = [
        'sql = f"SELECT id FROM {units} WHERE held_on = %s"',
        "sql = \"UPDATE t SET held_on = '' WHERE id = %s\"",
        'sql = f"(s.kind = %s AND EXISTS (SELECT 1 FROM {runs} r WHERE r.id = s.run_id))"',
        'sql = (\n    "WITH picked AS (SELECT id FROM t) "\n    "DELETE FROM t"\n)',
        'sql = f"INSERT INTO {table} ({columns}) VALUES {values}"',
    ]
    for source in statements:
        assert _sql_statements(ast.parse(source)), source
    prose = [
        'def f():\n    """SELECT … FROM, as a docstring quotes it."""',
        'message = "Update the counter, then select from the rest"',
        'clause = " FOR NO KEY UPDATE"',
    ]
    for source in prose:
        assert _sql_statements(ast.parse(source)) == [], source
    # The package's own statements, old and moved, are what the check would see elsewhere.
    for name in ("rows", "updates", "claim_reads", "inserts", "held_units", "limit_rows"):
        assert _sql_statements(ast.parse((SQL_PACKAGE / f"{name}.py").read_text())), name


def test_identifiers_come_from_the_apps_models_and_their_fields():
    assert table(Run) == '"workflows_run"'
    assert column(Step, "run") == column(Step, "run_id") == '"run_id"'
    assert column(FanOutItem, "index") == '"index"'
    with pytest.raises(ValueError, match="not a model of the workflows app"):
        table(User)
    with pytest.raises(FieldDoesNotExist):
        column(Step, "status; DROP TABLE workflows_run")
    with pytest.raises(ValueError, match="has no column"):
        column(Run, "steps")


def test_a_status_enters_sql_text_only_as_a_member_of_a_status_enum():
    assert status_literal(StepStatus.READY) == "'ready'"
    with pytest.raises(TypeError):
        status_literal("ready'; DROP TABLE x; --")


def test_the_claim_read_states_the_ready_index_condition_as_a_constant():
    """SQLite uses the partial index of ready work (``status = 'ready'``) only for a
    query that states that condition as the same constant, not as a bound parameter."""
    sql, params = claim_reads._preferred('"workflows_step"', 7)
    assert "u.status = 'ready'" in sql
    assert "ready" not in params
