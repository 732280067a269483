"""Each pytest-xdist worker as an installation of its own: its Redis namespace, var dir, ports.

Loaded with ``-p`` (pyproject's addopts), so it runs before pytest-django reads the settings:
a conftest.py is imported too late for settings that are fixed at import. pytest-django gives
each worker its own test database (``test_mcphost_gw0``); this gives it the rest of what the
settings derive an installation from. Without it both workers would share one namespace
(derived from the database name they were started with), and with it the channel layer's
groups, the invalidation channel and Celery's queues: one worker's Celery worker would take
the other's calls and fail to find their rows in its own database.

The servers and workers a test starts inherit both (tests/conftest.py exports the namespace).
Ports: each worker hands out free ports (scripts/services.free_port) from its own part of the
range, so a port one worker's test leaves free for a moment (a fault test's Redis killed and
started again on it) is never handed to the other worker's next server.
Outside xdist (a targeted run) nothing changes.
"""

from __future__ import annotations

import os
from pathlib import Path

from scripts import services

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
COUNT = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)


def worker_namespace(worker: str) -> str:
    """The Redis namespace of xdist worker ``worker`` (``gw0``, ``gw1``...) in a test run."""
    return f"mcphost:test-{worker}"


def other_workers_namespaces() -> set[str]:
    """The namespaces of the run's other workers: what a test watching all of Redis ignores."""
    workers = {f"gw{n}" for n in range(COUNT)} - {WORKER}
    return {worker_namespace(worker) for worker in workers}


if WORKER:
    os.environ["REDIS_NAMESPACE"] = worker_namespace(WORKER)
    if var_dir := os.environ.get("MCPHOST_VAR_DIR"):
        # The settings write a generated SECRET_KEY there: two workers must not race for it.
        worker_var = Path(var_dir) / WORKER
        worker_var.mkdir(parents=True, exist_ok=True)
        os.environ["MCPHOST_VAR_DIR"] = str(worker_var)
    if WORKER.startswith("gw") and WORKER[2:].isdigit() and int(WORKER[2:]) < COUNT:
        services.share_ports(int(WORKER[2:]), COUNT)
