"""Personal API tokens: issue one (shown once), and find the token a request presents."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from django.contrib.auth.models import User
from django.utils import timezone

from mcp_app.models import ApiToken

TOKEN_PREFIX = "mcpk_"
# last_used_at is written at most this often per token, not on every request.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def api_token_issue(*, token: ApiToken) -> str:
    """Give an unsaved ``token`` a new secret and return it; only its digest is kept."""
    key = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token.prefix = key[: len(TOKEN_PREFIX) + 6]
    token.key_hash = _digest(key)
    return key


def api_token_create(
    *, user: User, name: str, expires_at: datetime | None = None
) -> tuple[ApiToken, str]:
    """Create a token for ``user``; return it with the plain key, which is never stored."""
    token = ApiToken(user=user, name=name, expires_at=expires_at)
    key = api_token_issue(token=token)
    token.full_clean()
    token.save()
    return token, key


def api_token_authenticate(*, key: str) -> ApiToken | None:
    """Return the live token of ``key`` (its user loaded), or None.

    None for an unknown, expired or malformed key and for an inactive user.
    """
    if not key.startswith(TOKEN_PREFIX):
        return None
    token = ApiToken.objects.select_related("user").filter(key_hash=_digest(key)).first()
    now = timezone.now()
    if token is None or token.is_expired(now) or not token.user.is_active:
        return None
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token
