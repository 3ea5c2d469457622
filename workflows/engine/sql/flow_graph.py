"""Walking a flow's dependency edges in the database: does one member reach another?

Staging the edge ``upstream → downstream`` would close a cycle exactly when
``downstream`` already reaches ``upstream``. One recursive statement answers that,
however large the flow, so staging an edge costs a fixed number of statements
(``tests/engine/sql/test_query_budget.py``); both SQLite and PostgreSQL run ``WITH
RECURSIVE``, and ``UNION`` (not ``UNION ALL``) visits each member once.
"""

from __future__ import annotations

import functools

from workflows.engine.sql.connection import engine_connection
from workflows.engine.sql.execute import fetch_one
from workflows.engine.sql.identifiers import column, table
from workflows.models import FlowEdge


def reaches(start: int, target: int) -> bool:
    """Whether member ``target`` is downstream of member ``start`` along the edges."""
    return fetch_one(engine_connection(), _reach_text(), [start, target]) is not None


@functools.cache
def _reach_text() -> str:
    edges = table(FlowEdge)
    upstream, downstream = column(FlowEdge, "upstream"), column(FlowEdge, "downstream")
    return (
        f"WITH RECURSIVE reach(member) AS ("
        f"SELECT {downstream} FROM {edges} WHERE {upstream} = %s "
        f"UNION SELECT e.{downstream} FROM {edges} e JOIN reach ON e.{upstream} = reach.member"
        f") SELECT 1 FROM reach WHERE member = %s LIMIT 1"
    )
