"""Django admin for the catalog and sessions: one module per model, forms in forms.py."""

from mcp_app.admin import endpoint, prompt, resource, resource_template, session, tool

__all__ = ["endpoint", "prompt", "resource", "resource_template", "session", "tool"]
