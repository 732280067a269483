"""Fixtures of the management API tests: users with chosen permissions and their tokens."""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib.auth.models import Permission, User


def make_user(username: str, permissions: Sequence[str] = ()) -> User:
    """A non-staff user holding ``permissions`` ("mcp_app.change_tool" style)."""
    user = User.objects.create_user(username=username, password="unused-password-123")
    for name in permissions:
        app_label, codename = name.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return user


CATALOG_PERMISSIONS = [
    f"mcp_app.{action}_{model}"
    for model in ("endpoint", "tool", "resource", "resourcetemplate", "prompt", "credential")
    for action in ("view", "add", "change", "delete")
]
