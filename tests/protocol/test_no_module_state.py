"""The protocol layer keeps no state of its own between requests.

Whatever it derives and keeps (compiled schemas, parsed templates, Mcp-Param header lists)
lives in a cache object its caller owns and passes in (``SchemaCache``, ``TemplateCache``,
``ParamHeaderCache``). A module-level container is a constant only when typed read-only
(``Mapping``, ``Sequence``, ``AbstractSet``), so mypy refuses any write through its name; a
module-level cache decorator or ``global`` rebinding is state by definition.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PROTOCOL = Path(__file__).resolve().parents[2] / "mcp_app" / "protocol"
MODULES = sorted(PROTOCOL.rglob("*.py"))
# Expressions that build a mutable container.
_CONTAINERS = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)
_CONTAINER_CALLS = frozenset(
    {"dict", "list", "set", "bytearray", "defaultdict", "OrderedDict", "Counter", "deque"}
)
_READ_ONLY = frozenset({"Mapping", "Sequence", "AbstractSet", "Collection", "Iterable"})
_CACHING = frozenset({"lru_cache", "cache", "cached_property"})


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _builds_container(value: ast.expr | None) -> bool:
    if isinstance(value, _CONTAINERS):
        return True
    return isinstance(value, ast.Call) and _name(value) in _CONTAINER_CALLS


def _read_only(annotation: ast.expr) -> bool:
    if _name(annotation) == "Final" and isinstance(annotation, ast.Subscript):
        annotation = annotation.slice
    return _name(annotation) in _READ_ONLY


def module_state(source: str) -> list[str]:
    """What in ``source`` is module-level mutable state, as ``line: description``."""
    found = []
    tree = ast.parse(source)
    for node in tree.body:
        if not isinstance(node, ast.Assign | ast.AnnAssign) or not _builds_container(node.value):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if all(_name(target).startswith("__") for target in targets):
            continue  # __all__ and its kind are read by tools, not by the code
        if isinstance(node, ast.Assign):
            found.append(f"{node.lineno}: a mutable container without a read-only type")
        elif not _read_only(node.annotation):
            found.append(f"{node.lineno}: a container typed {ast.unparse(node.annotation)}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            found.append(f"{node.lineno}: global {', '.join(node.names)}")
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:
                if _name(decorator) in _CACHING:
                    found.append(f"{node.lineno}: {node.name} is cached by the module")
    return found


@pytest.mark.parametrize("path", MODULES, ids=lambda path: str(path.relative_to(PROTOCOL)))
def test_a_protocol_module_keeps_no_state(path: Path) -> None:
    assert module_state(path.read_text()) == []


@pytest.mark.parametrize(
    "source",
    [
        "_seen: dict[int, str] = {}",
        "_seen = {}",
        "_order: list[str] = []",
        "_kept = dict()",
        "_names: Final = {'a': 'b'}",
        "@lru_cache(maxsize=8)\ndef parse(text): ...",
        "@functools.cache\ndef parse(text): ...",
        "def bump():\n    global count\n    count += 1",
    ],
)
def test_the_check_finds_module_state(source: str) -> None:
    assert module_state(source) != []


def test_the_check_lets_read_only_constants_through() -> None:
    source = (
        "A: Final[Mapping[str, int]] = {'a': 1}\n"
        "B: Mapping[str, int] = {'b': 2}\n"
        "C: Final = frozenset({'c'})\n"
        "D: Final[tuple[str, ...]] = ('d',)\n"
    )
    assert module_state(source) == []
