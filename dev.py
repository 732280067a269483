#!/usr/bin/env python3
"""The README's two commands: ``python3 dev.py run`` and ``python3 dev.py test [pytest args]``.

Both first bootstrap ``.venv`` (created with ``python3 -m venv``, filled from
``requirements.lock``, skipped when the lock file's hash matches the stamp in ``.venv``).

``run`` serves the embedded setup on 127.0.0.1: SQLite and the in-memory channel layer in
``var/``, after migrate, ``seed_demo`` (endpoint "demo") and ``ensure_admin``; the web process
also runs the upkeep schedule (``MCPHOST_EMBEDDED_BEAT``, mcp_app/ops/beat.py).
``test`` starts a throwaway PostgreSQL and Redis (scripts/services.py), runs ``lint-imports``,
``ruff check .``, ``mypy`` and pytest against them, and always removes both servers afterwards.

Stdlib only: this file runs before the virtual environment exists.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NoReturn

MIN_PYTHON = (3, 11)
ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
LOCK_FILE = ROOT / "requirements.lock"
# Holds the sha256 of the lock file the venv was last filled from.
STAMP_FILE = VENV / ".mcphost-lock-sha256"
DEFAULT_PORT = 8000
# pytest's "no tests were collected": a test command that tests nothing has failed.
PYTEST_NO_TESTS = 5
# pytest-xdist workers of a whole-suite run (MCPHOST_TEST_WORKERS): the machines have 2 cores.
DEFAULT_TEST_WORKERS = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143
# Settings that would make a test run depend on the developer's shell; the test command
# supplies its own DATABASE_URL/REDIS_URL and leaves the rest at the settings' defaults.
TEST_ENV_DROPPED = (
    "DATABASE_URL",
    "DATABASE_REPLICA_URL",
    "DATABASE_CONN_HEALTH_CHECKS",
    "DATABASE_POOL_MIN_SIZE",
    "DATABASE_POOL_MAX_SIZE",
    "DATABASE_POOL_TIMEOUT",
    "DATABASE_POOL_MAX_WAITING",
    "DATABASE_POOL_MAX_IDLE",
    "DATABASE_CONNECT_TIMEOUT_SECONDS",
    "DATABASE_STATEMENT_TIMEOUT_SECONDS",
    "REDIS_URL",
    "CELERY_BROKER_URL",
    "PUBLIC_BASE_URL",
    "ALLOWED_HOSTS",
    "CSRF_TRUSTED_ORIGINS",
    "DEBUG",
    "SECRET_KEY",
    "STATIC_ROOT",
    "MEDIA_ROOT",
    "MCPHOST_VAR_DIR",
)

if sys.version_info < MIN_PYTHON:
    sys.exit(f"dev.py needs Python {'.'.join(map(str, MIN_PYTHON))}+, not {sys.version.split()[0]}")

from scripts import services  # noqa: E402  (after the version check, which must run first)
from scripts.services import ServiceError, log  # noqa: E402


class StepFailed(Exception):
    """A step of a command failed; the message says which and how."""


# --------------------------------------------------------------------------- timing


class PhaseTimer:
    """Times named phases and prints each one as it ends, and a summary at the end."""

    def __init__(self) -> None:
        self.phases: list[tuple[str, float, str]] = []

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.monotonic()
        outcome = "failed"
        try:
            yield
            outcome = "done"
        finally:
            elapsed = time.monotonic() - start
            self.phases.append((name, elapsed, outcome))
            log(f"{name}: {outcome} in {elapsed:.1f}s")

    def record(self, name: str, elapsed: float, outcome: str) -> None:
        self.phases.append((name, elapsed, outcome))
        log(f"{name}: {outcome} in {elapsed:.1f}s")

    def summary(self) -> None:
        log("phase timings:")
        for name, elapsed, outcome in self.phases:
            log(f"  {name:<22} {elapsed:7.1f}s  {outcome}")


# --------------------------------------------------------------------------- processes

_current_child: subprocess.Popen[bytes] | None = None
_terminated = False


def _on_sigterm(signum: int, frame: object) -> None:
    """Stop the running tool too, then take the Ctrl-C path so the servers are still removed.

    SIGTERM (a CI time limit, a supervisor) reaches only this process, unlike a terminal's
    Ctrl-C, so it is passed on to the child explicitly.
    """
    global _terminated
    _terminated = True
    if _current_child is not None and _current_child.poll() is None:
        _current_child.terminate()
    raise KeyboardInterrupt


def run_child(cmd: list[str], env: dict[str, str]) -> int:
    """Run a command in the foreground and return its exit code.

    On Ctrl-C the child received the same SIGINT from the terminal: let it finish its own
    shutdown (pytest prints its summary) instead of killing it, then re-raise.
    """
    global _current_child
    process = subprocess.Popen(cmd, cwd=ROOT, env=env)
    _current_child = process
    try:
        return process.wait()
    except KeyboardInterrupt:
        try:
            process.wait(timeout=30)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            process.kill()
            process.wait()
        raise
    finally:
        _current_child = None


# --------------------------------------------------------------------------- bootstrap


def venv_bin(name: str) -> Path:
    return VENV / "bin" / name


def _venv_works() -> bool:
    python = venv_bin("python")
    if not python.exists():
        return False
    probe = subprocess.run(
        [str(python), "-c", "import pip"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return probe.returncode == 0


def _create_venv() -> bool:
    if VENV.exists():
        # A half-made venv (no python or no pip) only makes the next attempt fail.
        shutil.rmtree(VENV)
    result = subprocess.run([sys.executable, "-m", "venv", str(VENV)], stdin=subprocess.DEVNULL)
    return result.returncode == 0 and _venv_works()


def ensure_venv() -> None:
    """Create .venv when missing or broken; on Debian, install python3-venv if needed."""
    if _venv_works():
        return
    log(f"creating virtual environment {VENV.relative_to(ROOT)}/")
    if _create_venv():
        return
    # Debian's python3 ships without ensurepip; the python3-venv package adds it.
    try:
        services.apt_install("python3-venv")
    except ServiceError as exc:
        raise StepFailed(
            f"could not create {VENV}: `{sys.executable} -m venv` failed ({exc})"
        ) from exc
    if not _create_venv():
        raise StepFailed(f"could not create {VENV} even after installing python3-venv")


def lock_digest() -> str:
    return hashlib.sha256(LOCK_FILE.read_bytes()).hexdigest()


def ensure_dependencies() -> None:
    """Install the pinned dependencies unless the venv already holds this lock file's set."""
    if not LOCK_FILE.exists():
        raise StepFailed(f"{LOCK_FILE.name} is missing")
    digest = lock_digest()
    if STAMP_FILE.exists() and STAMP_FILE.read_text().strip() == digest:
        return
    log(f"installing pinned dependencies from {LOCK_FILE.name}")
    cmd = [
        str(venv_bin("python")),
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--require-virtualenv",
        "-r",
        str(LOCK_FILE),
    ]
    result = subprocess.run(cmd, cwd=ROOT, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        raise StepFailed(f"pip install -r {LOCK_FILE.name} failed (exit {result.returncode})")
    STAMP_FILE.write_text(digest + "\n")


def reexec_in_venv(script: str) -> None:
    """Run ``script`` again inside .venv (made as the README's commands make it) unless it is.

    For the stdlib-only prologue of commands outside dev.py (bench/compare.py, bench/soak.py).
    """
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    ensure_venv()
    ensure_dependencies()
    python = str(VENV / "bin" / "python")
    os.execv(python, [python, script, *sys.argv[1:]])


def bootstrap(timer: PhaseTimer) -> None:
    with timer.phase("bootstrap venv"):
        ensure_venv()
        ensure_dependencies()


def django_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for manage.py, daphne and the test tools: the project on sys.path."""
    env = dict(os.environ if base is None else base)
    env["DJANGO_SETTINGS_MODULE"] = "mcpsite.settings"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["VIRTUAL_ENV"] = str(VENV)
    env["PATH"] = os.pathsep.join([str(VENV / "bin"), env.get("PATH", "")])
    return env


# --------------------------------------------------------------------------- run


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Same option Twisted sets, so a port in TIME_WAIT after the last run counts as free.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def manage(env: dict[str, str], *args: str) -> None:
    cmd = [str(venv_bin("python")), str(ROOT / "manage.py"), *args]
    code = run_child(cmd, env)
    if code != 0:
        raise StepFailed(f"`python manage.py {' '.join(args)}` failed (exit {code})")


def choose_stdio_bridge_url(env: dict[str, str]) -> None:
    """Give the stdio bridge a free loopback port in ``env`` (unless MCP_STDIO_BRIDGE_URL names
    one), before anything reads the settings: the web process and the checks see it too."""
    if env.get("MCP_STDIO_SERVERS", "").strip() and not env.get("MCP_STDIO_BRIDGE_URL"):
        env["MCP_STDIO_BRIDGE_URL"] = f"http://127.0.0.1:{services.free_port()}"


def start_stdio_bridge(env: dict[str, str]) -> str:
    """Start ``manage.py mcp_stdio_bridge`` beside the web process; return its URL.

    Only when MCP_STDIO_SERVERS allows some stdio server. It listens at MCP_STDIO_BRIDGE_URL
    (``choose_stdio_bridge_url``) and ends with the web process (``--exit-with-parent``:
    Daphne takes over this process, its parent).
    """
    cmd = [str(venv_bin("python")), str(ROOT / "manage.py"), "mcp_stdio_bridge"]
    subprocess.Popen([*cmd, "--exit-with-parent", "--skip-checks"], cwd=ROOT, env=env)
    return env["MCP_STDIO_BRIDGE_URL"]


def cmd_run(port: int) -> NoReturn:
    timer = PhaseTimer()
    bootstrap(timer)
    if not port_is_free(port):
        raise StepFailed(f"port {port} on 127.0.0.1 is in use: pick another with --port")
    local = f"http://127.0.0.1:{port}"
    env = django_env()
    env.setdefault("PUBLIC_BASE_URL", local)
    # No proxy in front of the embedded setup: Daphne's process serves the admin's CSS and JS.
    env.setdefault("SERVE_STATIC", "1")
    # No beat process either: Daphne's process runs the upkeep schedule (mcp_app/ops/beat.py).
    env.setdefault("MCPHOST_EMBEDDED_BEAT", "1")
    if env.get("DATABASE_URL"):
        # The URL may hold a password: name its source, not its value.
        data = "the database at DATABASE_URL (from your environment)"
    else:
        data = f"embedded SQLite in {env.get('MCPHOST_VAR_DIR') or ROOT / 'var'}"
    choose_stdio_bridge_url(env)
    with timer.phase("migrate"):
        manage(env, "migrate", "--noinput", "--verbosity", "0")
    # migrate ran the system checks; running them again would repeat their warnings.
    with timer.phase("seed_demo"):
        manage(env, "seed_demo", "--skip-checks")
    with timer.phase("ensure_admin"):
        manage(env, "ensure_admin", "--skip-checks")
    bridge = start_stdio_bridge(env) if env.get("MCP_STDIO_SERVERS", "").strip() else ""
    print(
        "\n"
        f"  Admin:         {local}/admin/\n"
        f"  MCP endpoint:  {local}/mcp/demo\n"
        f"  Connect page:  {local}/endpoints/demo/connect/\n"
        f"  Public base:   {env['PUBLIC_BASE_URL']}\n"
        f"  Data:          {data}"
        f" (channel layer: {'Redis' if env.get('REDIS_URL') else 'in-memory'})\n"
        + (f"  stdio bridge:  {bridge} (MCP_STDIO_SERVERS)\n" if bridge else "")
        + "\n  Serving with Daphne; press Ctrl-C to stop.\n",
        flush=True,
    )
    daphne = [
        str(venv_bin("python")),
        "-m",
        "daphne",
        "--bind",
        "127.0.0.1",
        "--port",
        str(port),
        "mcpsite.asgi:application",
    ]
    os.chdir(ROOT)
    # Daphne takes over this process: Ctrl-C and SIGTERM go straight to its own clean shutdown.
    os.execve(daphne[0], daphne, env)


# --------------------------------------------------------------------------- test


def cmd_test(pytest_args: list[str]) -> int:
    timer = PhaseTimer()
    try:
        return _test(timer, pytest_runs(pytest_args, os.environ))
    finally:
        timer.summary()


def pytest_runs(pytest_args: list[str], environ: Mapping[str, str]) -> list[tuple[str, list[str]]]:
    """The pytest runs of one test command, each named, in order, with its arguments.

    The whole suite (CI's run, no arguments) runs in two: the tests not marked ``serial`` on
    ``MCPHOST_TEST_WORKERS`` pytest-xdist workers (default 2, the machines' cores), each test
    file meant for one worker (``xdist_group``, tests/conftest.py, unread under pytest 9);
    then the ``serial`` tests alone, in one process. Its slowest tests are named: the
    command's time is budgeted (about 20 minutes), and this is where a test that grew shows
    first. ``MCPHOST_TEST_WORKERS=1`` runs it in one process, as one run. A targeted run
    (paths, ``-k``...) is one run in one process with exactly the arguments given; ``-n 2``
    among them asks for workers.
    """
    # Each xdist worker's own Redis namespace, var dir and ports, loaded before pytest-django
    # reads the settings; it changes nothing in a run without workers.
    plugin = ["-p", "tests.support.parallel"]
    if pytest_args:
        return [("pytest", [*plugin, *pytest_args])]
    setting = environ.get("MCPHOST_TEST_WORKERS", "").strip() or str(DEFAULT_TEST_WORKERS)
    if not setting.isdigit() or int(setting) < 1:
        raise StepFailed(
            f"MCPHOST_TEST_WORKERS must be a whole number of 1 or more, not {setting!r}"
        )
    workers = int(setting)
    durations = ["--durations=25"]
    if workers == 1:
        return [("pytest", [*plugin, *durations])]
    return [
        (
            f"pytest -n {workers}",
            [*plugin, "-n", str(workers), "--dist", "loadgroup", "-m", "not serial", *durations],
        ),
        ("pytest serial", [*plugin, "-m", "serial", *durations]),
    ]


def combined_exit_code(codes: list[int]) -> int:
    """The exit code of pytest runs taken together: the first failure's.

    A run that collected nothing fails the command only if every run did: the serial run of
    the whole suite may find no test marked serial.
    """
    failures = [code for code in codes if code not in (0, PYTEST_NO_TESTS)]
    if failures:
        return failures[0]
    return PYTEST_NO_TESTS if set(codes) == {PYTEST_NO_TESTS} else 0


def _test(timer: PhaseTimer, runs: list[tuple[str, list[str]]]) -> int:
    bootstrap(timer)
    dropped = [name for name in TEST_ENV_DROPPED if name in os.environ]
    dropped += sorted(name for name in os.environ if name.startswith("MCP_"))
    if dropped:
        log(f"ignoring these variables of your shell for the test run: {', '.join(dropped)}")
    env = django_env(
        {k: v for k, v in os.environ.items() if k not in dropped and not k.startswith("MCP_")}
    )

    lint_failures = []
    # mypy's django-stubs plugin loads the settings, which write a generated SECRET_KEY into
    # the var dir: a throwaway one keeps the tree's var/ out of it.
    with tempfile.TemporaryDirectory(prefix="mcphost-lint-") as lint_var:
        for name, cmd in (
            ("lint-imports", [str(venv_bin("lint-imports"))]),
            ("ruff check", [str(venv_bin("ruff")), "check", "."]),
            ("mypy", [str(venv_bin("mypy"))]),
        ):
            start = time.monotonic()
            code = run_child(cmd, {**env, "MCPHOST_VAR_DIR": lint_var})
            outcome = "ok" if code == 0 else f"FAILED ({code})"
            timer.record(name, time.monotonic() - start, outcome)
            if code != 0:
                lint_failures.append(name)

    with contextlib.ExitStack() as stack:
        # Settings write a generated SECRET_KEY into the var dir: keep the tree's var/ out of it.
        var_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="mcphost-var-"))
        env["MCPHOST_VAR_DIR"] = var_dir
        with timer.phase("start postgres"):
            env["DATABASE_URL"] = stack.enter_context(services.postgres())
        with timer.phase("start redis"):
            env["REDIS_URL"] = stack.enter_context(services.redis())
        with timer.phase("chromium"):
            services.ensure_chromium()
        log(f"DATABASE_URL={env['DATABASE_URL']} REDIS_URL={env['REDIS_URL']}")
        codes = []
        for name, args in runs:
            start = time.monotonic()
            run_code = run_child([str(venv_bin("python")), "-m", "pytest", *args], env)
            outcome = "ok" if run_code == 0 else f"exit {run_code}"
            timer.record(name, time.monotonic() - start, outcome)
            codes.append(run_code)
        stop_start = time.monotonic()
    timer.record("stop services", time.monotonic() - stop_start, "done")

    code = combined_exit_code(codes)
    if code == PYTEST_NO_TESTS:
        log("pytest collected no tests: counted as a failure")
    if code != 0:
        return code
    if lint_failures:
        log(f"tests passed but {' and '.join(lint_failures)} failed")
        return 1
    return 0


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        prog="python3 dev.py",
        description="Run mcphost locally, or run its checks and tests against throwaway "
        "PostgreSQL and Redis servers.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="serve the embedded setup on 127.0.0.1")
    run.add_argument("--port", type=int, default=DEFAULT_PORT, help="default %(default)s")
    commands.add_parser(
        "test",
        help="lint-imports, ruff and pytest against throwaway services; "
        "extra arguments go to pytest",
        add_help=False,
    )
    # Everything after "test" belongs to pytest (-k, -x, paths...), so argparse must not
    # see it: it would reject options it does not know.
    if args and args[0] == "test":
        command, pytest_args, port = "test", args[1:], DEFAULT_PORT
    else:
        options = parser.parse_args(args)
        command, pytest_args, port = options.command, [], options.port

    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        if command == "test":
            return cmd_test(pytest_args)
        return cmd_run(port)
    except (StepFailed, ServiceError) as exc:
        log(f"error: {exc}")
        return 1
    except KeyboardInterrupt:
        log("terminated" if _terminated else "interrupted")
        return EXIT_TERMINATED if _terminated else EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
