"""Handlers pass data on explicitly: nothing in the protocol layer writes a field of the
``RequestContext`` it was handed.

A value one step leaves on the context for a later one to read is a side channel (issue
#29): the tools handler's answers travel as ``CallInputs``, a reply's outcome as its
``Answer``, a legacy session's log level on the ``LegacySession`` it belongs to. Writing to
an attribute of a field (``ctx.session.log_level``) is the field's own business.
"""

from __future__ import annotations

import ast
from pathlib import Path

PROTOCOL = Path(__file__).resolve().parents[2] / "mcp_app" / "protocol"
# The names a RequestContext goes by in the protocol layer.
_CONTEXT_NAMES = frozenset({"ctx", "req"})
# Still written on the way to the call log (issue #29 names them as left to do).
_LEFT = frozenset({"logged_arguments"})


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
    """Where ``source`` assigns to a context field, as ``line: field``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        for target in targets:
            name = _context_field(target)
            if name is not None and name not in _LEFT:
                found.append(f"{node.lineno}: {name}")
    return found


def test_the_check_sees_a_write_to_a_context_field() -> None:
    source = "def f(ctx, self):\n    ctx.log_level = 'x'\n    self.request.era = 1\n"
    assert context_writes(source) == ["2: log_level", "3: era"]
    assert context_writes("def f(ctx):\n    ctx.session.log_level = 'x'\n") == []


def test_no_protocol_module_writes_a_context_field() -> None:
    found = {
        str(path.relative_to(PROTOCOL)): writes
        for path in sorted(PROTOCOL.rglob("*.py"))
        if (writes := context_writes(path.read_text()))
    }
    assert found == {}
