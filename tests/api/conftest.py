"""Fixtures of the management API tests: users with chosen permissions and their tokens, their
passwords hashed cheaply."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from pytest_django.fixtures import Settings
from rest_framework.test import APIClient

from mcp_app.services.api_tokens import api_token_create


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings: Settings) -> None:
    """Every user made here gets a password no test uses: hash it cheaply (PBKDF2's 1,000,000
    rounds cost 0.3-0.7 s a user on the test machine), as tests/admin/conftest.py does."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def make_user(username: str, permissions: Sequence[str] = (), *, every_team: bool = True) -> User:
    """A non-staff user holding ``permissions`` ("mcp_app.change_tool" style) and, with
    ``every_team``, ``manage_every_team``: an operator from before teams (issue #27), so
    these tests see every row; tests/support/teams.py makes team members."""
    user = User.objects.create_user(username=username, password="unused-password-123")
    extra = ["mcp_app.manage_every_team"] if every_team and permissions else []
    for name in [*permissions, *extra]:
        app_label, codename = name.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return user


@pytest.fixture
def token_client(db: None) -> Callable[..., APIClient]:
    """Return an APIClient authenticated by a fresh API token of a user with ``permissions``."""

    def make(*permissions: str, username: str = "robot", **kwargs: Any) -> APIClient:
        user = make_user(username, permissions)
        _token, key = api_token_create(user=user, name="ci", **kwargs)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
        return client

    return make


CATALOG_PERMISSIONS = [
    f"mcp_app.{action}_{model}"
    for model in (
        "endpoint",
        "tool",
        "resource",
        "resourcetemplate",
        "prompt",
        "credential",
        "upstream",
    )
    for action in ("view", "add", "change", "delete")
]
