"""Django admin for the catalog, credentials, sessions, background calls and the (read-only)
call log: a module per model, forms in forms.py."""

from django.contrib import admin

from mcp_app.admin import (
    api_token,
    background_call,
    call_log,
    connection,
    credential,
    drafts,
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

# The product's one name, as base.html and the API schema's title (SPECTACULAR_SETTINGS) say it.
admin.site.site_header = "mcphost"
admin.site.site_title = "mcphost"
admin.site.index_title = "Administration"

__all__ = [
    "api_token",
    "background_call",
    "call_log",
    "connection",
    "credential",
    "drafts",
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
