"""What the reference needs of the app's code that static analysis does not see.

mkdocstrings reads ``workflows`` with griffe, statically, without importing Django. Two
habits of the code read wrongly that way, and this griffe extension (``mkdocs.yml``,
``extensions:``) mends them before a page is rendered:

- A verb made by ``workflows.engine.created.value_of`` (``start_run`` of
  ``start_run_once``, ...) is, to a static reader, a module attribute holding a call.
  At runtime it is a function with the parameters of its ``*_once`` twin, returning the
  value that ``Created`` holds, and the docstring given to ``value_of``: the reference
  shows it so.
- Docstrings cross-reference with Sphinx roles (``:func:`start_run```,
  ``:class:`~workflows.errors.PermanentError```), which Markdown would print as they
  are written; they become inline code of the name, shortened as ``~`` asks.
"""

from __future__ import annotations

import ast
import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|meth|class|mod|data|attr|exc|obj|const):`(~?)([^`]+)`")


def markdown_roles(text: str) -> str:
    """``text`` with each Sphinx role written as inline code of the name it names."""

    def code(match: re.Match[str]) -> str:
        short, target = match.groups()
        return f"`{target.rsplit('.', 1)[-1] if short else target}`"

    return ROLE.sub(code, text)


class FlowsiteReference(griffe.Extension):
    """Verbs of ``value_of`` as functions; Sphinx roles as Markdown (module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        # attribute made by value_of → (its module, the *_once function's name, docstring)
        self._verbs: list[tuple[griffe.Attribute, str, str]] = []

    def on_attribute_instance(
        self, *, node: ast.AST | griffe.ObjectNode, attr: griffe.Attribute, **kwargs: Any
    ) -> None:
        """Note an attribute assigned ``value_of(once, "name", "docstring")``."""
        value = getattr(node, "value", None)
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "value_of"
            and len(value.args) == 3
            and isinstance(value.args[0], ast.Name)
        ):
            self._verbs.append((attr, value.args[0].id, ast.literal_eval(value.args[2])))

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Replace the noted attributes by functions, then rewrite every docstring."""
        for attr, once_name, doc in self._verbs:
            module = attr.parent
            if module is None or not attr.path.startswith(pkg.path + "."):
                continue
            once = module.get_member(once_name)
            if once.is_alias:
                once = once.final_target
            returns = once.returns
            if isinstance(returns, griffe.ExprSubscript) and returns.canonical_name == "Created":
                returns = returns.slice
            verb = griffe.Function(
                attr.name,
                lineno=attr.lineno,
                endlineno=attr.endlineno,
                parameters=once.parameters,
                returns=returns,
                docstring=griffe.Docstring(doc, lineno=attr.lineno),
            )
            module.set_member(attr.name, verb)
        self._rewrite_docstrings(pkg)

    def _rewrite_docstrings(self, obj: griffe.Object) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown_roles(obj.docstring.value)
        for member in obj.members.values():
            if not member.is_alias:
                self._rewrite_docstrings(member)  # type: ignore[arg-type]
