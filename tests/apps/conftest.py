"""Fixtures of the MCP Apps tests: the extension's own JSON Schema, bundled (schemas/), and a
sample view."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from pytest_django.fixtures import Settings

HERE = Path(__file__).parent
SCHEMA = json.loads((HERE / "schemas" / "ext-apps.schema.json").read_text())
SAMPLE_VIEW = (HERE / "sample_view.html").read_text()
VIEW_SDK = HERE / "vendor" / "ext-apps-app-with-deps.js"


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings: Settings) -> None:
    """Users made in a test (admin_client's user) get a password no test uses: hash it
    cheaply, as tests/admin/conftest.py does. Module-scoped fixtures make their users before
    this runs, with the product's hasher: those sign in on a live server, which must check it."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


# The view the extension's own SDK runs (vendor/README.md): the same echo view as
# sample_view.html, through App and PostMessageTransport.
_SDK_APP = """
const { App, PostMessageTransport } = window.extApps;
const app = new App({ name: "sdk-view", version: "1.0.0" }, {});
app.ontoolinput = (params) => {
  document.body.dataset.input = JSON.stringify(params.arguments);
};
app.ontoolresult = (params) => {
  document.getElementById("result").textContent = params.content
    .map((block) => block.text || "")
    .join("");
  document.body.dataset.host = app.getHostVersion().name;
  document.body.dataset.tool = app.getHostContext().toolInfo.tool.name;
};
app.connect(new PostMessageTransport(window.parent, window.parent)).then(
  () => { document.body.dataset.connected = "yes"; },
  (error) => { document.body.dataset.connected = `no: ${error}`; },
);
"""


def sdk_view() -> str:
    """An HTML view running the extension's App SDK, inline."""
    bundle = VIEW_SDK.read_text()
    start = bundle.rindex("export{")
    names = bundle[start + len("export{") : bundle.rindex("}")].split(",")
    exported = ",".join(f"{alias}:{local}" for local, _as, alias in (n.split(" ") for n in names))
    script = f"{bundle[:start]}window.extApps={{{exported}}};\n{_SDK_APP}"
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>SDK view</title>'
        f'</head><body><pre id="result"></pre><script type="module">{script}</script>'
        "</body></html>"
    )


# The published file refers to "#/$defs/__schema0" (a JSON Schema of a tool's input property,
# left out by its generator) without defining it: any value is accepted there, as its types
# say (schemas/README.md).
DEFS = {"__schema0": {}, **SCHEMA["$defs"]}


def assert_valid(definition: str, value: Any) -> None:
    """Check ``value`` against the ``$defs`` entry ``definition`` of the extension's schema."""
    schema = {**SCHEMA, "$defs": DEFS, "$ref": f"#/$defs/{definition}"}
    Draft202012Validator.check_schema(schema)
    errors = [error.message for error in Draft202012Validator(schema).iter_errors(value)]
    assert errors == [], errors
