"""JSON merge patch (RFC 7386): the RFC's Appendix A examples, and neither input changed."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from workflows.merge_patch import merge_patch

# RFC 7386, Appendix A: (original, patch, result), row by row.
APPENDIX_A: list[tuple[Any, Any, Any]] = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("original", "patch", "result"), APPENDIX_A)
def test_rfc_7386_appendix_a(original, patch, result):
    before = (copy.deepcopy(original), copy.deepcopy(patch))
    assert merge_patch(original, patch) == result
    assert (original, patch) == before  # a new document; the inputs are left alone


def test_patches_apply_in_order():
    summary: Any = {}
    for patch in ({"rows": 1, "stage": "load"}, {"rows": 2}, {"stage": None, "done": True}):
        summary = merge_patch(summary, patch)
    assert summary == {"rows": 2, "done": True}
