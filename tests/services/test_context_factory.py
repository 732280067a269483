"""The one factory of a ``RequestContext`` (services/context_factory.py)."""

from __future__ import annotations

import inspect
import os

from mcp_app.executors.mcp_upstream import ONE_CALL_PREFIX
from mcp_app.services.context_factory import caller_key, request_context


def test_the_context_factory_names_and_types_every_argument() -> None:
    # Each field a caller may set is a typed keyword, so mypy checks every call site; a
    # ``**fields`` would let any name and any value through unchecked.
    parameters = inspect.signature(request_context).parameters.values()
    assert [p.name for p in parameters if p.kind is p.VAR_KEYWORD] == []
    assert [p.name for p in parameters if p.annotation is inspect.Parameter.empty] == []
    assert [p.name for p in parameters if p.kind is p.KEYWORD_ONLY]


def test_an_anonymous_callers_key_is_its_own() -> None:
    # A 2026-07-28 call without a token is a caller for that call only: each call's key is
    # new (a process prefix and a counter, no system call), and a forked child (a Celery pool
    # process) takes a prefix of its own, so it never repeats its parent's keys.
    keys = {caller_key(principal="", session_id="") for _ in range(1000)}
    assert len(keys) == 1000
    assert all(key.startswith(ONE_CALL_PREFIX) for key in keys)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover (the child reports through the pipe)
        os.write(write, caller_key(principal="", session_id="").encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        childs = pipe.read().decode()
    os.waitpid(child, 0)
    parents_next = caller_key(principal="", session_id="")
    assert childs.startswith(ONE_CALL_PREFIX) and childs not in keys
    assert childs[: len(ONE_CALL_PREFIX) + 16] != parents_next[: len(ONE_CALL_PREFIX) + 16]
    assert caller_key(principal="user:7/client:x", session_id="") == "user:7"
    assert caller_key(principal="", session_id="abc") == "session:abc"
