"""Who may use a catalog row: an optional OAuth scope and optional Django groups.

``AccessRules`` is an abstract base shared by Tool, Resource, ResourceTemplate and Prompt, so
the four kinds gate access the same way (``mcp_app.auth.access`` applies the rules). The rules
matter only on endpoints whose auth mode is OAuth; public endpoints have no principal.
"""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError
from django.db import models

# RFC 6749 section 3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ).
SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5B\x5D-\x7E]+")
SCOPE_MAX_CHARS = 64


def validate_scope_name(value: str) -> None:
    if value and (len(value) > SCOPE_MAX_CHARS or not SCOPE_TOKEN.fullmatch(value)):
        raise ValidationError(
            f"{value!r} is not a scope name: up to {SCOPE_MAX_CHARS} visible ASCII characters, "
            'no spaces, quotes (") or backslashes.'
        )


class AccessRules(models.Model):
    required_scope = models.CharField(
        max_length=SCOPE_MAX_CHARS,
        blank=True,
        validators=[validate_scope_name],
        help_text=(
            "OAuth scope a token needs to use this (e.g. mcp:write). Clients still see it "
            "listed, so they can ask the user for the scope. Empty: the endpoint's base scope "
            "is enough."
        ),
    )
    allowed_groups = models.ManyToManyField(
        "auth.Group",
        blank=True,
        related_name="+",
        help_text=(
            "Only members of these groups see and use it on OAuth endpoints. Empty: every "
            "signed-in user."
        ),
    )

    class Meta:
        abstract = True
