"""Resources and prompts read from an upstream MCP server, and completions asked of it.

``relay`` calls an upstream for the caller (in the caller's session, as a tool call would);
``UpstreamPromptSource`` and ``UpstreamCompleter`` are the protocol ports that serve an
upstream's prompts and completions, ``upstream_read_resource`` the reader's upstream half.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from mcp_app.executors import mcp_upstream
from mcp_app.executors.base import UpstreamTarget
from mcp_app.executors.mcp_upstream import UpstreamRefused, UpstreamUnavailable
from mcp_app.protocol.catalog import PromptDef, ResourceTemplateDef
from mcp_app.protocol.errors import INTERNAL_ERROR, METHOD_NOT_FOUND, InternalError, RelayedError
from mcp_app.protocol.results import ToolError
from mcp_app.services.upstream_targets import upstream_target

logger = logging.getLogger(__name__)


async def relay(
    name: str,
    call: Callable[[UpstreamTarget], Awaitable[Any]],
    caller: str = "",
    request_headers: Mapping[str, Sequence[str]] | None = None,
) -> Any:
    """Run ``call`` on the upstream ``name`` for a resource read or a prompt get.

    The same session, timeouts, breaker and health record as its tools; what comes back has
    the upstream's credential redacted. Failures become JSON-RPC errors with a clear message:
    the upstream's own error keeps its code.

    Raises:
        RelayedError: the upstream answered with a JSON-RPC error.
        InternalError: unknown, disabled or failing upstream, or it could not be reached.
    """
    try:
        target = await upstream_target(name, caller=caller, request_headers=request_headers)
    except ToolError as exc:
        raise _internal_error(exc) from None
    assert target.report is not None
    try:
        result = await call(target)
    except UpstreamRefused as exc:
        # It answered: the upstream is healthy, the request was not.
        await target.report(None)
        message = f"The upstream {name!r} refused: {exc.upstream_message}"
        raise RelayedError(exc.code if exc.code is not None else INTERNAL_ERROR, message) from None
    except UpstreamUnavailable as exc:
        await target.report(exc.detail)
        raise _internal_error(exc) from None
    except ToolError as exc:
        # Not the upstream's failure: the caller's own (a per-user connection that ended
        # mid-request). Its message says what to do.
        raise _internal_error(exc) from None
    await target.report(None)
    # Already without the credential's secrets: the executor redacts what it decodes.
    return result


def _internal_error(failure: ToolError) -> InternalError:
    """The JSON-RPC error for ``failure``; the call log tells an unreachable upstream apart."""
    error = InternalError(failure.message)
    if failure.outcome is not None:
        error.outcome = failure.outcome
    return error


def port_caller(caller: str) -> str:
    """The session a resource read, prompt or completion of ``caller`` goes to: the caller's
    own, except for a caller known for one call only, whose reads share the upstream's session
    (no call of such a caller can have left state in any session it would find again)."""
    return "" if caller.startswith(mcp_upstream.ONE_CALL_PREFIX) else caller


async def upstream_read_resource(
    name: str,
    remote_uri: str,
    uri: str,
    *,
    caller: str = "",
    request_headers: Mapping[str, Sequence[str]] | None = None,
) -> list[dict[str, Any]]:
    """Read ``remote_uri`` on the upstream ``name`` in ``caller``'s session; contents served
    as our ``uri``.

    Raises: as ``relay``.
    """
    contents = await relay(
        name,
        lambda target: mcp_upstream.read_resource(target, remote_uri, caller=port_caller(caller)),
        port_caller(caller),
        request_headers,
    )
    # The client asked for our URI: the parts that are the resource itself say so.
    return [{**item, "uri": uri} if item.get("uri") == remote_uri else item for item in contents]


class UpstreamPromptSource:
    """The ``PromptSource`` port: prompts of an upstream are got from it (in the session of
    ``caller``, the request's ``RequestContext.caller``), the rest rendered."""

    def __init__(
        self, caller: str = "", request_headers: Mapping[str, Sequence[str]] | None = None
    ) -> None:
        self.caller = port_caller(caller)
        self.request_headers = request_headers

    async def get_prompt(
        self, prompt: PromptDef, arguments: Mapping[str, str]
    ) -> Mapping[str, Any] | None:
        key = prompt.binding
        if getattr(key, "upstream", None) is None:
            return None
        result: Mapping[str, Any] = await relay(
            key.upstream,
            lambda target: mcp_upstream.get_prompt(
                target, key.remote_name, arguments, caller=self.caller
            ),
            self.caller,
            self.request_headers,
        )
        return result


class UpstreamCompleter:
    """The ``Completer`` port: arguments of an upstream's prompts and templates are completed
    there (in the session of ``caller``, as ``UpstreamPromptSource``); an upstream that does
    not complete (method not found) leaves them to the row's own values."""

    def __init__(
        self, caller: str = "", request_headers: Mapping[str, Sequence[str]] | None = None
    ) -> None:
        self.caller = port_caller(caller)
        self.request_headers = request_headers

    async def complete(
        self,
        item: PromptDef | ResourceTemplateDef,
        argument: str,
        value: str,
        context_arguments: Mapping[str, str],
    ) -> Mapping[str, Any] | None:
        key = item.binding
        upstream = getattr(key, "upstream", None)
        if upstream is None:
            return None
        if isinstance(item, PromptDef):
            ref = {"type": "ref/prompt", "name": key.remote_name}
        else:
            ref = {"type": "ref/resource", "uri": key.remote_uri_template}
        try:
            found: Mapping[str, Any] = await relay(
                upstream,
                lambda target: mcp_upstream.complete(
                    target, ref, argument, value, context_arguments, caller=self.caller
                ),
                self.caller,
                self.request_headers,
            )
        except RelayedError as exc:
            if exc.code == METHOD_NOT_FOUND:
                return None
            raise
        return found
