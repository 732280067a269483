"""Set a stdio child's resource limits, then become the allow-listed program.

Run by the bridge as ``python -I launch.py MEMORY_MB CPU_SECONDS OPEN_FILES PROGRAM ARGS...``
(``-`` for a limit left as it is): the limits are set in the new process, then ``execvp``
replaces it with the program, its arguments passed verbatim (no shell). A separate program
rather than ``preexec_fn``, which is unsafe in a process with threads.

Standard library only, and run by path: nothing of mcp_app is imported in the child.
"""

import os
import resource
import sys


def _limit(kind: int, value: str, scale: int = 1) -> None:
    if value != "-":
        amount = int(value) * scale
        resource.setrlimit(kind, (amount, amount))


def main(argv: list[str]) -> None:
    memory_mb, cpu_seconds, open_files, *command = argv
    _limit(resource.RLIMIT_AS, memory_mb, 1024 * 1024)
    _limit(resource.RLIMIT_CPU, cpu_seconds)
    _limit(resource.RLIMIT_NOFILE, open_files)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"cannot run {command[0]!r}: {exc.strerror}\n")
        sys.exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])
