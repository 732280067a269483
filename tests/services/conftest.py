"""Fixtures for service tests: every test starts with an empty snapshot cache."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _empty_snapshot_cache(fresh_snapshot_cache: None) -> None:
    """Snapshots cached by an earlier test must not answer for this one."""
