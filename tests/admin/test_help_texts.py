"""Help texts keep their placeholders (issue #28): the admin renders help texts as HTML, so
("upstream": "<name>") showed as ("upstream": "") until the text was escaped."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("page", "shown"),
    [
        ("admin:mcp_app_upstream_add", '("upstream": "<name>")'),
        ("admin:mcp_app_upstream_add", '{"API_TOKEN": "<credential name>"}'),
        ("admin:mcp_app_credential_add", '("credential": "<name>")'),
    ],
)
def test_a_help_texts_placeholder_is_shown_as_written(
    admin_client: Client, page: str, shown: str
) -> None:
    content = admin_client.get(reverse(page)).content.decode()

    # The text as written, escaped once: a browser shows the placeholder.
    assert escape(shown) in content
    assert "&amp;lt;" not in content  # escaped once, not twice
