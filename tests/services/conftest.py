"""Fixtures for service tests: every test starts with an empty snapshot cache, and the users
they make get cheaply hashed passwords."""

from __future__ import annotations

import pytest
from pytest_django.fixtures import Settings


@pytest.fixture(autouse=True)
def _empty_snapshot_cache(fresh_snapshot_cache: None) -> None:
    """Snapshots cached by an earlier test must not answer for this one."""


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings: Settings) -> None:
    """admin_user's and the team members' passwords are never typed in (force_login, tokens):
    hash them cheaply (PBKDF2 costs 0.3-0.7 s a user here), as tests/admin/conftest.py does."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
