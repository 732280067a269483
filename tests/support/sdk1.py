"""A cached virtual environment with the python SDK 1.x (``mcp==1.30.*``) for the 1.x tests.

mcp 1.x and 2.x cannot share one environment, so the 1.x client runs as a subprocess with
its own interpreter. The environment is built once from PyPI into ``.cache/`` (ignored by git)
and reused; a marker file records what was installed.
"""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

from scripts.installs import installing

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENT = "mcp==1.30.*"
VENV = ROOT / ".cache" / "mcp-sdk-1"


def sdk1_python() -> Path:
    """The interpreter of the 1.x environment, built on first use.

    Raises:
        RuntimeError: the environment could not be built (e.g. PyPI unreachable), with pip's
            output.
    """
    with installing(VENV):
        return _build()


def _build() -> Path:
    """Build the environment unless it is there (under its install lock)."""
    python = VENV / "bin" / "python"
    marker = VENV / ".installed"
    if marker.exists() and marker.read_text() == REQUIREMENT and python.exists():
        return python
    venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", REQUIREMENT],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"could not install {REQUIREMENT}:\n{done.stdout}\n{done.stderr}")
    marker.write_text(REQUIREMENT)
    return python


if __name__ == "__main__":
    print(sdk1_python(), file=sys.stdout)
