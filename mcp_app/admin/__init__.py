"""Django admin for the catalog, credentials, sessions, background calls and the (read-only)
call log: a module per model, forms in forms.py."""

from mcp_app.admin import (
    background_call,
    call_log,
    credential,
    endpoint,
    prompt,
    resource,
    resource_template,
    session,
    tool,
)

__all__ = [
    "background_call",
    "call_log",
    "credential",
    "endpoint",
    "prompt",
    "resource",
    "resource_template",
    "session",
    "tool",
]
