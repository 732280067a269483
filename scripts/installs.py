"""One install at a time into a shared cache folder (``.cache/``), across processes.

The test suite runs on several pytest-xdist workers, and each may need the same npm package or
virtual environment built in ``.cache/`` (the conformance harness, the Inspector, the
"everything" server, the 1.x SDK's venv). The first process to ask installs it; the others
wait, then find it installed, and none reads a half-installed folder (a worker once ran the
harness's ``index.js`` before the other worker's npm install had written its ``package.json``).

Stdlib only, like the rest of ``scripts``.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


def lock_path(home: Path) -> Path:
    """The lock file of install folder ``home``: beside it, so clearing ``home`` keeps it."""
    return home.parent / f"{home.name}.lock"


@contextlib.contextmanager
def installing(home: Path) -> Iterator[None]:
    """Hold ``home``'s install lock: check for the install and install it inside the block.

    An exclusive ``flock`` on ``lock_path(home)``, waited for as long as another process
    holds it. The kernel drops it when its holder exits, so an install that was killed
    blocks no one (the next process finds it incomplete and installs again).
    """
    home.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path(home), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
