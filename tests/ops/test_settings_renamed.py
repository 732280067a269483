"""Settings renamed to carry their unit: the new name wins, the old one is still read."""

from __future__ import annotations

import logging

import pytest
from django.test import override_settings

from mcp_app.conf import RENAMED, get_conf


@pytest.mark.parametrize("new, old", sorted(RENAMED.items()))
def test_an_old_name_is_still_read_with_a_warning(
    new: str, old: str, caplog: pytest.LogCaptureFixture
) -> None:
    with override_settings(**{old: "7.5"}), caplog.at_level(logging.WARNING, "mcp_app.conf"):
        assert getattr(get_conf(), new) == 7.5
    assert f"The setting {old} is deprecated: set {new} instead." in caplog.messages


@pytest.mark.parametrize("new, old", sorted(RENAMED.items()))
def test_the_new_name_wins_over_the_old_one(new: str, old: str) -> None:
    with override_settings(**{old: "7.5", new: "2"}):
        assert getattr(get_conf(), new) == 2.0


def test_every_old_name_maps_to_a_setting_with_a_unit() -> None:
    for new in RENAMED:
        assert new.endswith("_SECONDS") and hasattr(get_conf(), new)
