"""scripts/installs.py: processes that ask for the same install into a shared cache folder at
once (the pytest-xdist workers sharing ``.cache/``) get one complete install between them, and
``services.apt_install`` runs one apt-get at a time.

Each process runs a fake installer, not npm: it logs that it started, waits for the test's
go-ahead on its stdin, then writes the finished install. The test lets the first finish only
once the second has asked (it waits on the lock, or, without one, is installing too), so the
outcome does not depend on timing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from scripts import services
from scripts.installs import lock_path
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]

ASK = """
import sys
from pathlib import Path
from scripts.installs import installing

home = Path(sys.argv[1])
with installing(home):
    if not (home / "done").exists():
        home.mkdir(exist_ok=True)
        with open(home.parent / "installs.log", "a") as log:
            log.write("start\\n")
        sys.stdin.readline()  # the test's go-ahead
        (home / "done").write_text("complete")
print((home / "done").read_text())
"""


def _ask(home: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", ASK, str(home)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _starts(home: Path) -> int:
    log = home.parent / "installs.log"
    return log.read_text().count("start") if log.exists() else 0


def _waits_for_lock(pid: int, lock: Path) -> bool:
    """Whether process ``pid`` is blocked on ``lock``'s flock (Linux's /proc/locks)."""
    inode = lock.stat().st_ino
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" not in fields:
            continue
        at = fields.index("->")
        if int(fields[at + 4]) == pid and int(fields[at + 5].rsplit(":", 1)[1]) == inode:
            return True
    return False


def _one_after_another(
    ask: Callable[[], subprocess.Popen[str]],
    starts: Callable[[], int],
    lock: Path,
    finish: Callable[[subprocess.Popen[str]], tuple[str, str]],
) -> list[tuple[str, str]]:
    """Start a process, and once it has started its work a second one; once the second
    waits on ``lock`` (or, without one, has started too), let both ``finish``. Returns
    their output; both must succeed."""
    first = ask()
    second = None
    try:
        wait_until(lambda: starts() == 1, "the first process at work")
        second = ask()
        wait_until(
            lambda: _waits_for_lock(second.pid, lock) or starts() == 2,
            "the second process asking",
        )
        answers = [finish(process) for process in (first, second)]
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    assert [process.returncode for process in (first, second)] == [0, 0], answers
    return answers


def test_two_processes_asking_at_once_get_one_complete_install(tmp_path: Path) -> None:
    home = tmp_path / "cache" / "tool-1.0"
    answers = _one_after_another(
        lambda: _ask(home),
        lambda: _starts(home),
        lock_path(home),
        lambda process: process.communicate("go\n", timeout=30),
    )
    assert [out for out, _ in answers] == ["complete\n", "complete\n"]
    assert _starts(home) == 1


FAKE_APT_GET = """#!/bin/sh
# Stands in for apt-get: logs its start, waits for the test's go-ahead file, logs its end.
echo start >> "{log}"
tries=0
while [ ! -e "{go}" ]; do
    sleep 0.05
    tries=$((tries + 1))
    [ "$tries" -gt 600 ] && exit 1
done
echo end >> "{log}"
"""

APT = "from scripts import services; services.apt_install('some-package')"


@pytest.mark.skipif(not services.is_root(), reason="apt_install runs only as root")
def test_two_apt_installs_at_once_run_apt_get_one_after_the_other(tmp_path: Path) -> None:
    """Two test workers that each find a package missing: the second apt-get waits for the
    first (dpkg's lock would refuse it) instead of running beside it."""
    log, go, bin_dir = tmp_path / "apt.log", tmp_path / "go", tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "apt-get"
    fake.write_text(FAKE_APT_GET.format(log=log, go=go))
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}

    def ask() -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-c", APT], cwd=ROOT, env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip

    def lines() -> list[str]:
        return log.read_text().split() if log.exists() else []

    def finish(process: subprocess.Popen[str]) -> tuple[str, str]:
        go.touch()
        return process.communicate(timeout=60)

    _one_after_another(
        ask, lambda: lines().count("start"), lock_path(services.APT_LOCK_HOME), finish
    )
    assert lines() == ["start", "end", "start", "end"]
