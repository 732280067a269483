"""A stdio upstream survives catalog export and import, and is checked against the target's
allow-list on the way in."""

from __future__ import annotations

import json

import pytest
from pytest_django.fixtures import Settings

from mcp_app.models import Upstream
from mcp_app.services.catalog_io import CatalogImportError, catalog_export, catalog_import
from mcp_app.services.credentials import credential_create

pytestmark = pytest.mark.django_db
SERVERS = {
    "files": {"command": ["server-files"], "args": ["--root=*"], "credential_env": ["TOKEN"]}
}
STDIO = ("transport", "stdio_server", "stdio_args", "stdio_cwd", "stdio_env")


@pytest.fixture(autouse=True)
def _allow_list(settings: Settings) -> None:
    settings.MCP_STDIO_SERVERS = json.dumps(SERVERS)


def make_stdio_upstream() -> Upstream:
    credential_create(name="files-token", kind="bearer", secret="s3cret")
    upstream = Upstream(
        name="files",
        transport=Upstream.Transport.STDIO,
        stdio_server="files",
        stdio_args=["--root=/data x"],
        stdio_env={"TOKEN": "files-token"},
    )
    upstream.full_clean()
    upstream.save()
    return upstream


def test_a_stdio_upstream_survives_export_and_import() -> None:
    make_stdio_upstream()
    document = catalog_export()
    [entry] = [item for item in document["upstreams"] if item["name"] == "files"]
    assert [entry[name] for name in STDIO] == [
        "stdio", "files", ["--root=/data x"], "", {"TOKEN": "files-token"},
    ]  # fmt: skip
    assert "s3cret" not in json.dumps(document)
    Upstream.objects.filter(name="files").update(stdio_args=[], stdio_env={})
    catalog_import(document=document)
    row = Upstream.objects.get(name="files")
    assert (row.stdio_args, row.stdio_env) == (["--root=/data x"], {"TOKEN": "files-token"})


def test_an_import_the_allow_list_does_not_offer_is_refused(settings: Settings) -> None:
    make_stdio_upstream()
    document = catalog_export()
    Upstream.objects.all().delete()
    settings.MCP_STDIO_SERVERS = ""
    with pytest.raises(CatalogImportError) as refused:
        catalog_import(document=document)
    assert "'files' is not an allowed stdio server" in str(refused.value)
    assert not Upstream.objects.exists()
