"""``manage.py rotate_credentials``: re-encrypt every credential secret with the first key
(and the other secrets kept the same way: upstreams' OAuth client secrets, users' upstream
connections).

Key rotation: put a new key first in MCP_SECRET_KEYS (keep the old ones after it), restart,
run this command, then remove the old keys. Until it has run, rows made with an old key still
decrypt, because every listed key decrypts.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from mcp_app.services.credentials import CredentialError, configured_keys, credential_rotate_all


class Command(BaseCommand):
    help = "Re-encrypt every credential secret with the first key of MCP_SECRET_KEYS."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            configured_keys()
            count = credential_rotate_all()
        except (CredentialError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"Re-encrypted {count} credential secret(s) with the first key.")
