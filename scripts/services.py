"""Throwaway PostgreSQL and Redis servers for the test command, as context managers.

``postgres()`` and ``redis()`` each start a private server on a free loopback port in a
temporary folder, yield its URL, and always stop the server and delete the folder afterwards.
Nothing here touches a system-wide cluster or service: the team's own servers keep running.

Stdlib only: dev.py imports this before the virtual environment exists. Missing server
binaries are installed from Debian's packages when we are root; otherwise ``ServiceError``
says what to install.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

from scripts.installs import installing

# Debian puts each major version's server binaries here, not on PATH.
PG_BIN_GLOB = "/usr/lib/postgresql/*/bin"
# The system user that owns clusters on Debian; initdb refuses to run as root.
PG_SYSTEM_USER = "postgres"
# Enough for a test suite that opens many connections (async consumers, live servers), on
# two pytest-xdist workers at once (each with its own servers and Celery worker).
PG_MAX_CONNECTIONS = 400
START_TIMEOUT_SECONDS = 30.0
STOP_TIMEOUT_SECONDS = 10.0
# Attempts with a fresh port: another process may take a free port between our probe and bind.
START_ATTEMPTS = 3

POLICY_RC_D = Path("/usr/sbin/policy-rc.d")
POLICY_RC_D_TEXT = "#!/bin/sh\n# Written by mcphost dev.py during apt-get.\nexit 101\n"
# apt_install's lock (scripts/installs.py): one apt-get at a time among our processes.
APT_LOCK_HOME = Path(tempfile.gettempdir()) / "mcphost-apt"
# How long apt-get waits for dpkg's own lock held by a process not ours (unattended-upgrades).
APT_DPKG_LOCK_WAIT_SECONDS = 300


class ServiceError(RuntimeError):
    """A throwaway server could not be provided; the message says why and what to do."""


def log(message: str) -> None:
    """Print a progress line of the dev tooling to stderr (stdout belongs to the tools run)."""
    print(f"[dev] {message}", file=sys.stderr, flush=True)


def is_root() -> bool:
    return os.geteuid() == 0


# free_port hands out ports just below the kernel's ephemeral range, in turn. The usual trick
# (bind port 0, read the port, close) races: the kernel may give the same port to the next
# bind(0) anywhere on the machine, a client's outgoing connection included, before the server
# meant to have it binds it. Below the ephemeral range no bind(0) ever lands; in turn, this
# process never hands out one port twice while the range lasts; from a start that depends on
# the process id, two test runs on one machine rarely walk the same ports.
_PORT_SPAN = 8000
_next_port: int | None = None
# This process's part of the range (index, count): see share_ports.
_port_share = (0, 1)


def share_ports(index: int, count: int) -> None:
    """Hand out only ports of part ``index`` of ``count`` equal parts of the range from now on.

    For the processes of one test run (pytest-xdist's workers): each walks its own part, so
    none hands out a port another handed out and left free for a moment (a server stopped to
    be restarted on the same port, one not yet listening).
    """
    global _next_port, _port_share
    _port_share = (index, count)
    _next_port = None


def _port_range() -> tuple[int, int]:
    try:
        ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768
    first = max(1024, ephemeral_low - _PORT_SPAN)
    end = max(first + 1, ephemeral_low)
    index, count = _port_share
    part = max(1, (end - first) // count)
    return first + index * part, min(end, first + (index + 1) * part)


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free now and that no one else is handed."""
    global _next_port
    first, end = _port_range()
    span = end - first
    if _next_port is None:
        _next_port = first + (os.getpid() * 7919) % span
    for _ in range(span):
        port, _next_port = _next_port, first + (_next_port - first + 1) % span
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use, or closed so lately that it lingers
            return port
    raise ServiceError(f"no free TCP port on 127.0.0.1 between {first} and {end}")


def apt_install(*packages: str) -> None:
    """Install Debian packages non-interactively without letting them start system services.

    Debian's postinst scripts start a system-wide server (a ``main`` PostgreSQL cluster on
    5432, redis-server on 6379); we only want the binaries. A temporary policy-rc.d that
    answers 101 ("action forbidden") stops that, as in Debian's Docker images.
    """
    names = " ".join(packages)
    if not is_root() or shutil.which("apt-get") is None:
        raise ServiceError(f"missing {names}: install it with `sudo apt-get install {names}`")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    wait = f"DPkg::Lock::Timeout={APT_DPKG_LOCK_WAIT_SECONDS}"
    install = ["apt-get", "-o", wait, "install", "-y", "--no-install-recommends", *packages]
    # Two test workers may each find a package missing at once (pgbouncer): the second waits
    # here, then finds it installed (apt-get does nothing) instead of failing on dpkg's lock
    # or removing the policy file while the first installs.
    with installing(APT_LOCK_HOME):
        created_policy = False
        if not POLICY_RC_D.exists():
            POLICY_RC_D.write_text(POLICY_RC_D_TEXT)
            POLICY_RC_D.chmod(0o755)
            created_policy = True
        try:
            log(f"installing {names} with apt-get")
            if subprocess.run(install, env=env, stdin=subprocess.DEVNULL).returncode != 0:
                # A fresh machine often has no or stale package lists.
                update = ["apt-get", "-o", wait, "update"]
                subprocess.run(update, env=env, stdin=subprocess.DEVNULL, check=True)
                subprocess.run(install, env=env, stdin=subprocess.DEVNULL, check=True)
        except subprocess.CalledProcessError as exc:
            raise ServiceError(f"apt-get failed to install {names}: {exc}") from exc
        finally:
            if created_policy:
                POLICY_RC_D.unlink(missing_ok=True)


# --------------------------------------------------------------------------- Chromium


def find_chromium() -> Path | None:
    """Return Debian's headless-capable Chromium (the browser tests drive it), or None."""
    found = shutil.which("chromium") or next(
        (p for p in ("/usr/bin/chromium",) if Path(p).exists()), None
    )
    return Path(found) if found else None


def ensure_chromium() -> None:
    """Install Debian's ``chromium`` for the browser tests when it is missing and we are root.

    Playwright's own browser download does not work on our machines, so the tests launch the
    system binary. Without root the tests that need it fail with an install hint.
    """
    if find_chromium() is not None:
        return
    if not is_root():
        log("chromium is missing: the browser tests will fail (sudo apt-get install chromium)")
        return
    apt_install("chromium")


# --------------------------------------------------------------------------- PostgreSQL


def find_pg_bindir() -> Path | None:
    """Return the folder of the newest installed initdb/pg_ctl, or None."""
    candidates = [Path(p) for p in glob.glob(PG_BIN_GLOB) if (Path(p) / "pg_ctl").exists()]
    if candidates:
        return max(candidates, key=lambda p: _version_key(p.parent.name))
    initdb = shutil.which("initdb")
    if initdb and shutil.which("pg_ctl"):
        return Path(initdb).parent
    return None


def _version_key(name: str) -> tuple[int, ...]:
    """Sort "9.6" < "15" < "17" numerically (plain string order would put "9.6" last)."""
    return tuple(int(part) if part.isdigit() else -1 for part in name.split("."))


def _pg_bindir_or_install() -> Path:
    bindir = find_pg_bindir()
    if bindir is None:
        apt_install("postgresql")
        bindir = find_pg_bindir()
    if bindir is None:
        raise ServiceError("PostgreSQL server binaries (initdb, pg_ctl) not found after install")
    return bindir


def _check_cluster_owner() -> None:
    """As root, make sure the system user that will own the throwaway cluster exists."""
    if not is_root():
        return
    try:
        pwd.getpwnam(PG_SYSTEM_USER)
    except KeyError as exc:
        raise ServiceError(
            f"running as root needs the '{PG_SYSTEM_USER}' system user to own the throwaway "
            "cluster (Debian's postgresql package creates it): apt-get install postgresql"
        ) from exc


def _as_cluster_owner(cmd: list[str]) -> list[str]:
    """Prefix a command so it runs as the cluster owner (root cannot own a cluster)."""
    return ["runuser", "-u", PG_SYSTEM_USER, "--", *cmd] if is_root() else cmd


def _pg_conf(socket_dir: Path) -> str:
    # Durability is worthless for a cluster deleted after the run; skipping it makes
    # pytest-django's create/flush cycles several times faster.
    return "\n".join(
        [
            "",
            "# Throwaway test cluster (mcphost scripts/services.py).",
            "listen_addresses = '127.0.0.1'",
            f"unix_socket_directories = '{socket_dir}'",
            f"max_connections = {PG_MAX_CONNECTIONS}",
            "fsync = off",
            "synchronous_commit = off",
            "full_page_writes = off",
            "log_min_messages = warning",
            # PostgreSQL's defaults, named because tests/ops/test_replica.py streams a replica
            # from this cluster (initdb's pg_hba.conf lets 127.0.0.1 replicate with trust).
            "wal_level = replica",
            "max_wal_senders = 10",
            "",
        ]
    )


@contextlib.contextmanager
def postgres(*, database: str = "mcphost") -> Iterator[str]:
    """Run a throwaway PostgreSQL cluster and yield its URL (trust auth, user ``postgres``)."""
    bindir = _pg_bindir_or_install()
    _check_cluster_owner()
    workdir = Path(tempfile.mkdtemp(prefix="mcphost-pg-"))
    datadir = workdir / "data"
    logfile = workdir / "server.log"
    try:
        if is_root():
            # The cluster owner must be able to enter the folder and write in it.
            shutil.chown(workdir, user=PG_SYSTEM_USER, group=None)
        initdb = [
            str(bindir / "initdb"),
            "--pgdata",
            str(datadir),
            "--username",
            "postgres",
            "--auth",
            "trust",
            "--encoding",
            "UTF8",
            "--no-locale",
            "--no-sync",
        ]
        _run_checked(_as_cluster_owner(initdb), "initdb")
        with (datadir / "postgresql.conf").open("a") as conf:
            conf.write(_pg_conf(workdir))
        for attempt in range(1, START_ATTEMPTS + 1):
            port = free_port()
            start = [
                str(bindir / "pg_ctl"),
                "--pgdata",
                str(datadir),
                "--log",
                str(logfile),
                "--options",
                f"-p {port}",
                "--wait",
                "--timeout",
                str(int(START_TIMEOUT_SECONDS)),
                "start",
            ]
            returncode, output = _run_to_completion(_as_cluster_owner(start))
            if returncode == 0:
                break
            if attempt == START_ATTEMPTS:
                raise ServiceError(f"PostgreSQL did not start: {output.strip()}\n{_tail(logfile)}")
        createdb = [
            str(bindir / "createdb"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--username",
            "postgres",
            database,
        ]
        _run_checked(_as_cluster_owner(createdb), "createdb")
        yield f"postgresql://postgres@127.0.0.1:{port}/{database}"
    finally:
        # The pid file exists from the postmaster's start until it has stopped.
        if (datadir / "postmaster.pid").exists():
            _pg_stop(bindir, datadir)
        shutil.rmtree(workdir, ignore_errors=True)


def _pg_stop(bindir: Path, datadir: Path) -> None:
    # "immediate" skips the shutdown checkpoint: the data is deleted right after.
    stop = [
        str(bindir / "pg_ctl"),
        "--pgdata",
        str(datadir),
        "--mode",
        "immediate",
        "--wait",
        "--timeout",
        str(int(STOP_TIMEOUT_SECONDS)),
        "stop",
    ]
    returncode, output = _run_to_completion(_as_cluster_owner(stop))
    if returncode != 0:
        # Last resort so no postmaster outlives the run: its pid is the pid file's first line.
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int((datadir / "postmaster.pid").read_text().splitlines()[0])
            os.kill(pid, signal.SIGKILL)
            log(f"PostgreSQL did not stop ({output.strip()}); killed pid {pid}")


class Standby:
    """A hot-standby replica made by ``postgres_replica()``: its URL, and stop/start."""

    def __init__(self, bindir: Path, datadir: Path, logfile: Path, database: str) -> None:
        self.bindir, self.datadir, self.logfile, self.database = bindir, datadir, logfile, database
        self.port = 0

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{self.database}"

    def start(self) -> None:
        """Start it (on its former port once it has one), waiting until it accepts reads."""
        for attempt in range(1, START_ATTEMPTS + 1):
            port = self.port or free_port()
            start = [
                str(self.bindir / "pg_ctl"), "--pgdata", str(self.datadir),
                "--log", str(self.logfile), "--options", f"-p {port}",
                "--wait", "--timeout", str(int(START_TIMEOUT_SECONDS)), "start",
            ]  # fmt: skip
            returncode, output = _run_to_completion(_as_cluster_owner(start))
            if returncode == 0:
                self.port = port
                return
            if attempt == START_ATTEMPTS or self.port:
                raise ServiceError(
                    f"the replica did not start: {output.strip()}\n{_tail(self.logfile)}"
                )

    def stop(self) -> None:
        if (self.datadir / "postmaster.pid").exists():
            _pg_stop(self.bindir, self.datadir)


@contextlib.contextmanager
def postgres_replica(primary_url: str) -> Iterator[Standby]:
    """Stream a hot-standby replica of the PostgreSQL cluster at ``primary_url`` (a
    throwaway cluster's: trust auth, user ``postgres``, replication allowed from 127.0.0.1)
    and yield it, running on a free loopback port; it is stopped and deleted afterwards.

    Made as an operator makes one: ``pg_basebackup -R`` (a base backup of the whole cluster
    that writes the standby's connection to the primary) into a folder of its own.
    """
    bindir = _pg_bindir_or_install()
    _check_cluster_owner()
    primary = urlsplit(primary_url)
    workdir = Path(tempfile.mkdtemp(prefix="mcphost-pg-replica-"))
    datadir = workdir / "data"
    standby = Standby(bindir, datadir, workdir / "server.log", primary.path.lstrip("/"))
    try:
        if is_root():
            shutil.chown(workdir, user=PG_SYSTEM_USER, group=None)
        backup = [
            str(bindir / "pg_basebackup"), "--host", str(primary.hostname),
            "--port", str(primary.port or 5432), "--username", "postgres",
            "--pgdata", str(datadir), "--write-recovery-conf", "--wal-method", "stream",
            "--checkpoint", "fast", "--no-sync",
        ]  # fmt: skip
        _run_checked(_as_cluster_owner(backup), "pg_basebackup")
        with (datadir / "postgresql.conf").open("a") as conf:
            # The copied configuration still names the primary's socket folder.
            conf.write(f"\nunix_socket_directories = '{workdir}'\nhot_standby = on\n")
        standby.start()
        yield standby
    finally:
        standby.stop()
        shutil.rmtree(workdir, ignore_errors=True)


# --------------------------------------------------------------------------- Redis


def find_redis_server() -> Path | None:
    found = shutil.which("redis-server") or next(
        (p for p in ("/usr/bin/redis-server", "/usr/sbin/redis-server") if Path(p).exists()),
        None,
    )
    return Path(found) if found else None


@contextlib.contextmanager
def redis() -> Iterator[str]:
    """Run a throwaway Redis server (no persistence) and yield its URL."""
    binary = find_redis_server()
    if binary is None:
        apt_install("redis-server")
        binary = find_redis_server()
    if binary is None:
        raise ServiceError("redis-server not found after install")
    workdir = Path(tempfile.mkdtemp(prefix="mcphost-redis-"))
    logfile = workdir / "server.log"
    process: subprocess.Popen[bytes] | None = None
    try:

        def command(port: int) -> list[str]:
            return [
                str(binary),
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(workdir),
                "--daemonize",
                "no",
                "--logfile",
                str(logfile),
            ]

        process, port = _start_on_a_free_port("Redis", command, _wait_redis_ready, logfile)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        if process is not None:
            _stop_process(process)
        shutil.rmtree(workdir, ignore_errors=True)


def redis_ping(port: int, timeout: float = 1.0) -> bool:
    """Return True when a Redis server on 127.0.0.1:port answers PING."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def _wait_redis_ready(port: int, process: subprocess.Popen[bytes]) -> bool:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        if redis_ping(port):
            return True
        time.sleep(0.05)
    return False


def _stop_process(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=STOP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# --------------------------------------------------------------------------- PgBouncer


def find_pgbouncer() -> Path | None:
    found = shutil.which("pgbouncer") or next(
        (p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if Path(p).exists()), None
    )
    return Path(found) if found else None


@contextlib.contextmanager
def pgbouncer(database_url: str, *, pool_mode: str = "transaction") -> Iterator[str]:
    """Run a throwaway PgBouncer in front of the PostgreSQL at ``database_url`` (a throwaway
    cluster's: trust auth, user ``postgres``) and yield the URL that goes through it.

    Any database name is passed through to that server. Like a stock PgBouncer, it refuses a
    client that sends startup ``options``.
    """
    binary = find_pgbouncer()
    if binary is None:
        apt_install("pgbouncer")
        binary = find_pgbouncer()
    if binary is None:
        raise ServiceError("pgbouncer not found after install")
    _check_cluster_owner()  # PgBouncer refuses to run as root: it runs as the cluster owner
    target = urlsplit(database_url)
    workdir = Path(tempfile.mkdtemp(prefix="mcphost-pgbouncer-"))
    process: subprocess.Popen[bytes] | None = None
    try:
        if is_root():
            shutil.chown(workdir, user=PG_SYSTEM_USER, group=None)

        def command(port: int) -> list[str]:
            ini = workdir / "pgbouncer.ini"
            ini.write_text(
                "\n".join(
                    [
                        "[databases]",
                        f"* = host={target.hostname} port={target.port} user=postgres",
                        "[pgbouncer]",
                        "listen_addr = 127.0.0.1",
                        f"listen_port = {port}",
                        f"unix_socket_dir = {workdir}",
                        "auth_type = any",
                        f"pool_mode = {pool_mode}",
                        "default_pool_size = 20",
                        "max_client_conn = 500",
                        "ignore_startup_parameters = extra_float_digits",
                        "admin_users = postgres",
                        f"logfile = {workdir / 'pgbouncer.log'}",
                        "",
                    ]
                )
            )
            return _as_cluster_owner([str(binary), str(ini)])

        process, port = _start_on_a_free_port(
            "PgBouncer", command, _wait_listening, workdir / "pgbouncer.log"
        )
        yield f"postgresql://postgres@127.0.0.1:{port}{target.path}"
    finally:
        if process is not None:
            _stop_process(process)
        shutil.rmtree(workdir, ignore_errors=True)


def _start_on_a_free_port(
    name: str,
    command: Callable[[int], list[str]],
    ready: Callable[[int, subprocess.Popen[bytes]], bool],
    logfile: Path,
) -> tuple[subprocess.Popen[bytes], int]:
    """Start ``command(port)`` on a free port until ``ready`` says it serves (another process
    may take the port first); return the process and its port.

    Raises:
        ServiceError: it did not start in ``START_ATTEMPTS`` attempts (with its log's tail).
    """
    for _attempt in range(START_ATTEMPTS):
        port = free_port()
        process = subprocess.Popen(
            command(port),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        if ready(port, process):
            return process, port
        _stop_process(process)
    raise ServiceError(f"{name} did not start:\n{_tail(logfile)}")


def _wait_listening(port: int, process: subprocess.Popen[bytes]) -> bool:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1.0):
            return True
        time.sleep(0.05)
    return False


# --------------------------------------------------------------------------- helpers


def _run_to_completion(cmd: list[str]) -> tuple[int, str]:
    """Run a server control command and return (exit code, output), even across Ctrl-C.

    The command gets a session of its own, so Ctrl-C in the terminal reaches neither it nor
    the server it starts; on Ctrl-C we still wait for it to finish, because only then do we
    know whether a server is running that the cleanup must stop.
    """
    process = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate()
    except KeyboardInterrupt:
        process.communicate()
        raise
    return process.returncode, output


def _run_checked(cmd: list[str], what: str) -> None:
    returncode, output = _run_to_completion(cmd)
    if returncode != 0:
        raise ServiceError(f"{what} failed (exit {returncode}):\n{output.strip()}")


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no log at {path})"
