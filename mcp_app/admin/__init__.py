"""Django admin for the catalog, credentials, sessions, background calls and the (read-only)
call log: a module per model, forms in forms.py."""

from mcp_app.admin import (
    api_token,
    background_call,
    call_log,
    connection,
    credential,
    endpoint,
    group,
    policy,
    prompt,
    rate_limit,
    resource,
    resource_template,
    session,
    tool,
    upstream,
)

__all__ = [
    "api_token",
    "background_call",
    "call_log",
    "connection",
    "credential",
    "endpoint",
    "group",
    "policy",
    "prompt",
    "rate_limit",
    "resource",
    "resource_template",
    "session",
    "tool",
    "upstream",
]
