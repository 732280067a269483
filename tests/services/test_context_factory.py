"""The one factory of a ``RequestContext`` (services/context_factory.py)."""

from __future__ import annotations

import inspect

from mcp_app.services.context_factory import request_context


def test_the_context_factory_names_and_types_every_argument() -> None:
    # Each field a caller may set is a typed keyword, so mypy checks every call site; a
    # ``**fields`` would let any name and any value through unchecked.
    parameters = inspect.signature(request_context).parameters.values()
    assert [p.name for p in parameters if p.kind is p.VAR_KEYWORD] == []
    assert [p.name for p in parameters if p.annotation is inspect.Parameter.empty] == []
    assert [p.name for p in parameters if p.kind is p.KEYWORD_ONLY]
