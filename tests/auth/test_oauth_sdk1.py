"""The python SDK 1.x OAuth client (the older shape many clients still ship) against a real
server: DCR and CIMD, sign-in, calls, step-up without scope union, refresh with rotation.

The client runs in its own virtual environment (tests/support/sdk1.py) as a subprocess.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.auth.conftest import PASSWORD, SLUG, LiveSite
from tests.support.oauth import CIMD_CLIENT_ID
from tests.support.sdk1 import sdk1_python

pytestmark = pytest.mark.django_db

DRIVER = Path(__file__).with_name("sdk1_client.py")


@pytest.fixture(scope="module")
def python1() -> Path:
    return sdk1_python()


def run_client(python: Path, site: LiveSite, *extra: str) -> dict:
    done = subprocess.run(
        [str(python), str(DRIVER), site.notes_url, "bob", PASSWORD, *extra],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def scopes_asked(url: str) -> set[str]:
    return set(parse_qs(urlsplit(url).query)["scope"][0].split())


@pytest.mark.parametrize("registration", ["dcr", "cimd"])
def test_the_1x_client_signs_in_calls_steps_up_and_refreshes(
    python1: Path, live_site: LiveSite, registration: str
):
    extra = (CIMD_CLIENT_ID,) if registration == "cimd" else ()

    report = run_client(python1, live_site, *extra)

    assert report["tools"] == ["echo", "save_note"]
    assert report["echo"] == "hi"
    assert report["saved"] == "Saved x"
    assert report["after_refresh"] == "again"
    assert report["rotated"] is True
    first, second = report["authorize_urls"]
    assert scopes_asked(first) == {"mcp:read"}
    # 1.x asks for exactly what the 403 named: granted plus needed.
    assert scopes_asked(second) == {"mcp:read", "mcp:write"}
    assert report["scopes"] == ["mcp:read", "mcp:write"]
    trace = [tuple(step) for step in report["trace"]]
    assert ("POST", f"/mcp/{SLUG}", 403) in trace
    registered = ("POST", "/o/register/", 201) in trace
    assert registered is (registration == "dcr")
