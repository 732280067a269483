"""Keep the bridge's own environment and memory from its children.

Children run as the bridge's operating-system user. Linux lets a process read another of
its user's ``/proc/<pid>/environ`` and memory (and attach a debugger) while that process is
"dumpable", and the bridge's environment holds the deployment's secrets (``SECRET_KEY``, the
database URL, ``MCP_SECRET_KEYS`` in the compose file). Marking the bridge not dumpable
(``prctl(PR_SET_DUMPABLE, 0)``) makes those files root's and refuses the attach; a child's
``execve`` makes the child dumpable again, so nothing changes for it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4


def protect_process() -> bool:
    """Mark this process not dumpable; False where that cannot be done (not Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        return False
    return bool(libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0)
