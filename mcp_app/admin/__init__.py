"""Django admin for the catalog, credentials and sessions: a module per model, forms in forms.py."""

from mcp_app.admin import credential, endpoint, prompt, resource, resource_template, session, tool

__all__ = ["credential", "endpoint", "prompt", "resource", "resource_template", "session", "tool"]
