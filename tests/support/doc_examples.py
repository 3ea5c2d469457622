"""The ```python blocks of the documentation, read and run as a reader would paste them
(``tests/project/test_docs_examples.py`` runs every page's; the flows guide's test builds
its flow with them).

A page's blocks are of three sorts:

- a block whose first line names a file (``# builds/flows.py``) is part of that file; a
  page's blocks of one file are joined in page order, and the file becomes a module of
  that name (``builds.flows``), so the engine finds its handlers by dotted path;
- a block with ``<!-- example: not run (why) -->`` on the line before it is not run;
- every other block is *loose*: loose blocks run in page order in one namespace, the
  module :data:`PAGE_MODULE`.

Handlers a page names but leaves to the reader (``"shop.steps.charge_card"``) come from
stand-in modules (:data:`STAND_INS`) whose every public name is a handler that returns
nothing, so a page's workflows register and its runs finish as with the reader's own.
"""

from __future__ import annotations

import ast
import gc
import re
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from workflows.definitions import registry

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```([\w+-]*)\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)
HEADER = re.compile(r"#\s*(\S+)\.py\s*$")
NOT_RUN = re.compile(r"<!-- example: not run \((?P<why>[^)]+\S)\) -->")
# The module the loose blocks of a page run in.
PAGE_MODULE = "docs_page"
# The modules of the reader's project that pages name and do not show.
STAND_INS = (
    "archive.steps",
    "docs.handlers",
    "imports.steps",
    "ml.steps",
    "publishing.steps",
    "reports.steps",
    "shop.handlers",
    "shop.models",
    "shop.payments",
    "shop.sms",
    "shop.steps",
)


@dataclass(frozen=True)
class Block:
    """One ```python block: its page's id, its number on the page (from 1), its code, the
    file it belongs to (``builds/flows``) and why it is not run, if it is not."""

    page: str
    number: int
    code: str
    file: str | None
    not_run: str | None

    @property
    def id(self) -> str:
        return f"{self.page}:{self.number}"


def code_blocks(markdown: str) -> list[tuple[str, str]]:
    """(language, code) of every fenced block of a page, in page order."""
    return [(match[1], match[2]) for match in FENCE.finditer(markdown)]


def python_blocks(page: str, markdown: str) -> list[Block]:
    """The page's ```python blocks in order, each with the file its first line names and
    the reason the line before it gives for not running it."""
    blocks: list[Block] = []
    for match in FENCE.finditer(markdown):
        if match[1] != "python":
            continue
        code = match[2]
        header = HEADER.fullmatch(code.splitlines()[0]) if code else None
        before = markdown[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = NOT_RUN.fullmatch(before.strip())
        blocks.append(
            Block(
                page=page,
                number=len(blocks) + 1,
                code=code,
                file=header[1] if header else None,
                not_run=marker["why"] if marker else None,
            )
        )
    return blocks


def page_id(path: Path) -> str:
    """``guide/loops.md`` for a page of docs/, ``README.md`` for the README."""
    return path.relative_to(DOCS).as_posix() if DOCS in path.parents else path.name


# Every page, found by glob (a page added or moved is picked up), and its blocks.
PAGES = {page_id(path): path for path in [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]}
BLOCKS = {page: python_blocks(page, path.read_text()) for page, path in PAGES.items()}


def files(blocks: list[Block]) -> dict[str, str]:
    """The page's files (``builds/flows`` → source), their blocks joined in page order."""
    joined: dict[str, list[str]] = {}
    for block in blocks:
        if block.file and not block.not_run:
            joined.setdefault(block.file, []).append(block.code)
    return {name: "\n".join(codes) for name, codes in joined.items()}


def loose(blocks: list[Block]) -> list[Block]:
    """The blocks that run in the page's namespace: no file, no reason not to."""
    return [block for block in blocks if not block.file and not block.not_run]


def guide_test_names(source: str) -> list[str]:
    """The ``test_*`` functions a file of a page defines, in order."""
    return [
        node.name
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    ]


def run_guide_test(test: Callable[..., Any], request: pytest.FixtureRequest) -> None:
    """Call one ``test_*`` function of a page with the pytest fixtures it names."""
    code = test.__code__
    test(**{name: request.getfixturevalue(name) for name in code.co_varnames[: code.co_argcount]})


def _stand_in_module(name: str) -> types.ModuleType:
    """A module of the reader's project: each public name is a handler returning None."""
    module = types.ModuleType(name)

    def stand_in(attribute: str) -> Callable[..., None]:
        if attribute.startswith("_"):
            raise AttributeError(attribute)

        def handler(*args: Any, **kwargs: Any) -> None:
            return None

        handler.__name__ = handler.__qualname__ = attribute
        handler.__module__ = name
        setattr(module, attribute, handler)  # one handler per name, as a module has
        return handler

    module.__getattr__ = stand_in  # type: ignore[method-assign]
    return module


@contextmanager
def modules(names: list[str]) -> Iterator[dict[str, types.ModuleType]]:
    """Put empty modules of these dotted names (and their packages) in ``sys.modules``
    meanwhile; take them out afterwards with every workflow they registered, and put
    back what they shadowed (the namespace package ``docs``, say)."""
    wanted = sorted({".".join(name.split(".")[:i]) for name in names for i in range(1, 3)})
    shadowed = {name: sys.modules.get(name) for name in wanted}
    made: dict[str, types.ModuleType] = {}
    for name in wanted:
        made[name] = _stand_in_module(name) if name in STAND_INS else types.ModuleType(name)
        made[name].__path__ = []
        sys.modules[name] = made[name]
        if "." in name:
            parent, child = name.rsplit(".", 1)
            setattr(made[parent], child, made[name])
    try:
        yield made
    finally:
        for workflow in [w for w in registry.all() if w.__module__ in made]:
            registry.unregister(workflow.name, workflow.version)
        for name, previous in shadowed.items():
            if previous is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = previous
        made.clear()
        # Hook receivers a page connected are held weakly: gone with the page's modules.
        gc.collect()


@contextmanager
def without_the_demo() -> Iterator[None]:
    """The demo project's workflows out of the registry meanwhile: a reader's project has
    none of them, and the pages reuse their names (``order_fulfilment``)."""
    demo = [w for w in registry.all() if w.__module__.startswith("flowsite.")]
    for workflow in demo:
        registry.unregister(workflow.name, workflow.version)
    try:
        yield
    finally:
        for workflow in demo:
            registry.register(workflow)


@contextmanager
def page_example(
    page: str, borrowed: dict[str, str] | None = None
) -> Iterator[dict[str, types.ModuleType]]:
    """The page's files imported as modules (the files that are not ``tests`` first, in
    the order the page shows them), with the stand-ins and an empty :data:`PAGE_MODULE`
    for the loose blocks. ``borrowed`` maps a file to the page it is taken from (a page
    that uses another's workflow)."""
    sources = files(BLOCKS[page])
    for name, other in (borrowed or {}).items():
        sources[name] = files(BLOCKS[other])[name]
    names = [name.replace("/", ".") for name in sources]
    with without_the_demo(), modules([*STAND_INS, *names, PAGE_MODULE]) as made:
        for name in sorted(sources, key=lambda name: name.endswith("/tests")):
            module = made[name.replace("/", ".")]
            module.__file__ = str(PAGES[page])
            exec(compile(sources[name], f"{page}:{name}.py", "exec"), module.__dict__)
        yield made
