"""Tests of the README commands' machinery: dev.py, scripts/services.py, the lock file and
``manage.py ensure_admin``.

The test command itself exercises a full bootstrap and a throwaway PostgreSQL and Redis on
every run; these tests pin down what a run does not show: argument passing, the install
stamp, cleanup after the servers stop, and the admin credentials life cycle.
"""

from __future__ import annotations

import io
import os
import socket
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from pytest_django.fixtures import Settings

import dev
from scripts import services

ROOT = Path(dev.__file__).resolve().parent


# --------------------------------------------------------------------------- dev.py


def test_test_command_passes_every_argument_to_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    received: list[list[str]] = []
    monkeypatch.setattr(dev, "cmd_test", lambda args: received.append(args) or 0)

    assert dev.main(["test", "tests/protocol", "-k", "foo", "-x"]) == 0

    assert received == [["tests/protocol", "-k", "foo", "-x"]]


PLUGIN = ["-p", "tests.support.parallel"]


def test_whole_suite_runs_on_two_workers_then_the_serial_tests_alone() -> None:
    assert dev.pytest_runs([], {}) == [
        (
            "pytest -n 2",
            [*PLUGIN, "-n", "2", "--dist", "loadgroup", "-m", "not serial", "--durations=25"],
        ),
        ("pytest serial", [*PLUGIN, "-m", "serial", "--durations=25"]),
    ]


def test_worker_count_is_a_setting_and_one_worker_is_one_plain_run() -> None:
    runs = dev.pytest_runs([], {"MCPHOST_TEST_WORKERS": "3"})
    assert runs[0][1][2:4] == ["-n", "3"]
    assert dev.pytest_runs([], {"MCPHOST_TEST_WORKERS": "1"}) == [
        ("pytest", [*PLUGIN, "--durations=25"])
    ]


@pytest.mark.parametrize("workers", ["0", "two", "-1"])
def test_a_bad_worker_count_is_refused(workers: str) -> None:
    with pytest.raises(dev.StepFailed, match="MCPHOST_TEST_WORKERS"):
        dev.pytest_runs([], {"MCPHOST_TEST_WORKERS": workers})


def test_a_targeted_run_is_one_process_with_exactly_the_arguments_given() -> None:
    runs = dev.pytest_runs(["tests/protocol", "-k", "foo"], {"MCPHOST_TEST_WORKERS": "2"})
    assert runs == [("pytest", [*PLUGIN, "tests/protocol", "-k", "foo"])]


@pytest.mark.parametrize(
    ("codes", "expected"),
    [
        ([0, 0], 0),
        ([1, 0], 1),
        ([0, 1], 1),  # the serial run's failure fails the command
        ([0, 5], 0),  # no test marked serial
        ([5, 0], 0),
        ([5, 5], 5),  # nothing collected at all
        ([5, 2], 2),
        ([5], 5),
    ],
)
def test_runs_exit_with_the_first_failure(codes: list[int], expected: int) -> None:
    assert dev.combined_exit_code(codes) == expected


def test_each_worker_hands_out_ports_of_its_own_part(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(services, "_port_share", services._port_share)
    monkeypatch.setattr(services, "_next_port", services._next_port)
    services.share_ports(0, 1)
    first, end = services._port_range()
    handed = []
    for index in (0, 1):
        services.share_ports(index, 2)
        low, high = services._port_range()
        assert first <= low < high <= end
        ports = {services.free_port() for _ in range(20)}
        assert all(low <= port < high for port in ports)
        handed.append((low, high, ports))
    assert handed[0][1] <= handed[1][0]  # the parts do not overlap
    assert not handed[0][2] & handed[1][2]


# The settings an xdist worker runs with (tests/support/parallel.py loaded first, as -p does).
WORKER_SETTINGS = """
import tests.support.parallel
import django
django.setup()
from django.conf import settings
print(settings.REDIS_NAMESPACE)
print(settings.VAR_DIR)
print(settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"])
print(settings.CELERY_BROKER_TRANSPORT_OPTIONS["global_keyprefix"])
"""


@pytest.mark.parametrize("worker", ["gw0", "gw1"])
def test_each_xdist_worker_is_an_installation_of_its_own(worker: str, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "mcpsite.settings",
        "PYTEST_XDIST_WORKER": worker,
        "PYTEST_XDIST_WORKER_COUNT": "2",
        "MCPHOST_VAR_DIR": str(tmp_path),
        "REDIS_URL": "redis://127.0.0.1:1/0",
    }
    done = subprocess.run(
        [sys.executable, "-c", WORKER_SETTINGS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr

    namespace, var_dir, channels, celery = done.stdout.split()[-4:]
    assert namespace == f"mcphost:test-{worker}"
    assert channels == f"{namespace}:asgi:" and celery == f"{namespace}:celery:"
    assert Path(var_dir) == tmp_path / worker
    assert (tmp_path / worker / "secret_key").exists()


def test_run_command_reads_its_port(monkeypatch: pytest.MonkeyPatch) -> None:
    received: list[int] = []
    monkeypatch.setattr(dev, "cmd_run", lambda port: received.append(port) or 0)

    assert dev.main(["run", "--port", "8123"]) == 0
    assert dev.main(["run"]) == 0

    assert received == [8123, dev.DEFAULT_PORT]


def test_dependencies_are_not_reinstalled_when_the_stamp_matches(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    lock = tmp_path / "requirements.lock"
    lock.write_text("Django==5.2.19\n")
    stamp = tmp_path / "stamp"
    monkeypatch.setattr(dev, "LOCK_FILE", lock)
    monkeypatch.setattr(dev, "STAMP_FILE", stamp)
    installs: list[list[str]] = []

    class Done:
        returncode = 0

    monkeypatch.setattr(dev.subprocess, "run", lambda cmd, **kw: installs.append(cmd) or Done())

    dev.ensure_dependencies()
    dev.ensure_dependencies()
    assert len(installs) == 1
    assert stamp.read_text().strip() == dev.lock_digest()

    lock.write_text("Django==5.2.20\n")
    dev.ensure_dependencies()
    assert len(installs) == 2


def test_failed_install_leaves_no_stamp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    lock = tmp_path / "requirements.lock"
    lock.write_text("Django==5.2.19\n")
    monkeypatch.setattr(dev, "LOCK_FILE", lock)
    monkeypatch.setattr(dev, "STAMP_FILE", tmp_path / "stamp")

    class Failed:
        returncode = 1

    monkeypatch.setattr(dev.subprocess, "run", lambda cmd, **kw: Failed())

    with pytest.raises(dev.StepFailed):
        dev.ensure_dependencies()
    assert not (tmp_path / "stamp").exists()


def test_lock_file_pins_every_dependency_of_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [Requirement(r) for r in project["dependencies"]]
    wanted += [Requirement(r) for r in project["optional-dependencies"]["dev"]]
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version.strip()

    for requirement in wanted:
        version = pins.get(canonicalize_name(requirement.name))
        assert version is not None, f"{requirement.name} is not pinned in requirements.lock"
        assert requirement.specifier.contains(version, prereleases=True), (
            f"{requirement.name}=={version} does not satisfy {requirement}"
        )


# --------------------------------------------------------------------------- services


def test_newest_postgres_major_version_sorts_last() -> None:
    assert sorted(["15", "9.6", "17", "13"], key=services._version_key) == [
        "9.6",
        "13",
        "15",
        "17",
    ]


@pytest.mark.skipif(services.find_redis_server() is None, reason="redis-server not installed")
def test_throwaway_redis_answers_then_is_gone() -> None:
    with services.redis() as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        assert url.startswith("redis://127.0.0.1:")
        assert services.redis_ping(port)
    assert not services.redis_ping(port, timeout=0.2)


@pytest.mark.skipif(services.find_pg_bindir() is None, reason="PostgreSQL binaries not installed")
def test_throwaway_postgres_accepts_queries_then_is_gone() -> None:
    with services.postgres(database="probe") as url:
        with psycopg.connect(url) as conn:
            assert conn.execute("SHOW max_connections").fetchone() == ("400",)
            assert conn.execute("SELECT current_database()").fetchone() == ("probe",)
        port = int(url.rsplit(":", 1)[1].split("/")[0])
    with socket.socket() as sock:
        sock.settimeout(0.5)
        assert sock.connect_ex(("127.0.0.1", port)) != 0


# --------------------------------------------------------------------------- ensure_admin


def _ensure_admin() -> str:
    out = io.StringIO()
    call_command("ensure_admin", stdout=out, stderr=out)
    return out.getvalue()


@pytest.fixture
def var_dir(settings: Settings, tmp_path: Path) -> Path:
    settings.VAR_DIR = tmp_path
    return tmp_path


def _password(var_dir: Path) -> str:
    lines = (var_dir / "admin-credentials").read_text().splitlines()
    return dict(line.split(": ", 1) for line in lines)["password"]


@pytest.mark.django_db
def test_ensure_admin_creates_a_superuser_and_a_private_credentials_file(var_dir: Path) -> None:
    output = _ensure_admin()

    password = _password(var_dir)
    user = get_user_model().objects.get(username="admin")
    assert user.is_superuser and user.is_staff and user.check_password(password)
    assert password in output
    assert stat.S_IMODE((var_dir / "admin-credentials").stat().st_mode) == 0o600


@pytest.mark.django_db
def test_ensure_admin_keeps_and_reprints_the_password_on_later_runs(var_dir: Path) -> None:
    _ensure_admin()
    password = _password(var_dir)

    output = _ensure_admin()

    assert password in output
    assert _password(var_dir) == password
    assert get_user_model().objects.count() == 1


@pytest.mark.django_db
def test_ensure_admin_resets_the_password_when_the_file_is_gone(var_dir: Path) -> None:
    _ensure_admin()
    old = _password(var_dir)
    (var_dir / "admin-credentials").unlink()

    output = _ensure_admin()

    new = _password(var_dir)
    assert new != old and new in output
    assert get_user_model().objects.get(username="admin").check_password(new)


@pytest.mark.django_db
def test_ensure_admin_leaves_a_deliberately_changed_password_alone(var_dir: Path) -> None:
    _ensure_admin()
    user = get_user_model().objects.get(username="admin")
    user.set_password("changed by the operator")
    user.save()

    output = _ensure_admin()

    assert "was changed" in output
    user.refresh_from_db()
    assert user.check_password("changed by the operator")
