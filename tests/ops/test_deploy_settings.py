"""``manage.py check --deploy`` is clean with the documented production settings (issue #16),
and an https ``PUBLIC_BASE_URL`` alone turns the secure settings on. Run as subprocesses:
settings are read from the environment once, at import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from cryptography.fernet import Fernet

from tests.support.live import ROOT

# The production settings docs/operations.md lists ("Deploy settings"), with example values.
DOCUMENTED = {
    "PUBLIC_BASE_URL": "https://mcp.example.com",
    "SECRET_KEY": "k" * 20 + "-a-long-random-production-secret-key-value",
    "MCP_SECRET_KEYS": Fernet.generate_key().decode(),
    "SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "true",
    "SECURE_HSTS_PRELOAD": "true",
}
# Whatever the test run's shell or the developer set must not decide the outcome.
CLEARED = [
    "DEBUG", "SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE",
    "SECURE_HSTS_SECONDS", *DOCUMENTED,
]  # fmt: skip


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    base = {key: value for key, value in os.environ.items() if key not in CLEARED}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_check_deploy_is_clean_with_the_documented_settings() -> None:
    result = _run(DOCUMENTED, "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_check_deploy_warns_about_each_missing_setting_over_http() -> None:
    env = {**DOCUMENTED, "PUBLIC_BASE_URL": "http://mcp.example.com"}
    result = _run(env, "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in result.stderr


SHOW = (
    "import json; from django.conf import settings as s; print(json.dumps({n: getattr(s, n, None)"
    " for n in ['SECURE_SSL_REDIRECT', 'SESSION_COOKIE_SECURE', 'CSRF_COOKIE_SECURE',"
    " 'SECURE_HSTS_SECONDS', 'SECURE_HSTS_INCLUDE_SUBDOMAINS', 'SECURE_PROXY_SSL_HEADER']}))"
)


def _settings(env: dict[str, str]) -> dict[str, object]:
    result = _run(env, "shell", "--no-imports", "-c", SHOW)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_https_public_base_url_alone_is_secure_by_default() -> None:
    assert _settings({"PUBLIC_BASE_URL": "https://mcp.example.com"}) == {
        "SECURE_SSL_REDIRECT": True,
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "SECURE_HSTS_SECONDS": 31536000,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": False,
        "SECURE_PROXY_SSL_HEADER": None,
    }


def test_each_secure_setting_can_be_overridden_and_the_proxy_trusted() -> None:
    env = {
        "PUBLIC_BASE_URL": "https://mcp.example.com",
        "SECURE_SSL_REDIRECT": "false",
        "SESSION_COOKIE_SECURE": "0",
        "CSRF_COOKIE_SECURE": "no",
        "SECURE_HSTS_SECONDS": "0",
        "SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto",
    }
    assert _settings(env) == {
        "SECURE_SSL_REDIRECT": False,
        "SESSION_COOKIE_SECURE": False,
        "CSRF_COOKIE_SECURE": False,
        "SECURE_HSTS_SECONDS": 0,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": False,
        "SECURE_PROXY_SSL_HEADER": ["HTTP_X_FORWARDED_PROTO", "https"],
    }
