"""Handlers pass data on explicitly: nothing in the protocol layer writes a field of the
``RequestContext`` it was handed.

A value one step leaves on the context for a later one to read is a side channel (issue
#29): the tools handler's answers travel as ``CallInputs``, a reply's outcome as its
``Answer``, what the endpoint's policies did as the request's ``PolicyRecord`` (passed to the
handler, ``run_tool`` and the ``ToolCallContext``), a legacy session's log level on the
``LegacySession`` it belongs to. Writing to an attribute of a field (``ctx.session.log_level``)
is the field's own business; adding to a field in place (``ctx.x.append(...)``) is a write.
"""

from __future__ import annotations

import ast
from pathlib import Path

PROTOCOL = Path(__file__).resolve().parents[2] / "mcp_app" / "protocol"
# The names a RequestContext goes by in the protocol layer.
_CONTEXT_NAMES = frozenset({"ctx", "req"})
# Methods that change a list, dict or set in place.
_MUTATORS = frozenset(
    {"append", "extend", "insert", "remove", "pop", "clear", "update", "add", "setdefault"}
)


def _context_field(target: ast.expr) -> str | None:
    """The context field ``target`` assigns to (``ctx.x``, ``self.request.x``), or None."""
    if not isinstance(target, ast.Attribute):
        return None
    owner = target.value
    if isinstance(owner, ast.Name) and owner.id in _CONTEXT_NAMES:
        return target.attr
    if (
        isinstance(owner, ast.Attribute)
        and owner.attr == "request"
        and isinstance(owner.value, ast.Name)
        and owner.value.id == "self"
    ):
        return target.attr
    return None


def context_writes(source: str) -> list[str]:
    """Where ``source`` assigns to a context field or changes one in place, as ``line: field``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _MUTATORS
        ):
            targets = [node.func.value]
        else:
            continue
        for target in targets:
            name = _context_field(target)
            if name is not None:
                found.append(f"{node.lineno}: {name}")
    return found


def test_the_check_sees_a_write_to_a_context_field() -> None:
    source = "def f(ctx, self):\n    ctx.log_level = 'x'\n    self.request.era = 1\n"
    assert context_writes(source) == ["2: log_level", "3: era"]
    assert context_writes("def f(ctx):\n    ctx.session.log_level = 'x'\n") == []
    assert context_writes("def f(ctx):\n    ctx.decisions.extend([1])\n") == ["2: decisions"]
    assert context_writes("def f(ctx):\n    ctx.session.ids.add(1)\n") == []


def test_no_protocol_module_writes_a_context_field() -> None:
    found = {
        str(path.relative_to(PROTOCOL)): writes
        for path in sorted(PROTOCOL.rglob("*.py"))
        if (writes := context_writes(path.read_text()))
    }
    assert found == {}
