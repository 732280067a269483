"""Every Lua script touches only the keys it declares in KEYS (issue #30, after issue #27's note).

Redis Cluster routes a script by its declared keys, and an ACL user limited to some keys is
checked against the keys a script's commands name: a script that reaches a key it did not
declare breaks both. Two checks against the real Redis: each script's source, read with the
key positions Redis reports for each command it runs (``COMMAND INFO``); and the limiter's
task path run as a Redis user allowed exactly the keys each script run declares.
"""

from __future__ import annotations

import ast
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings

from mcp_app.models import RateLimit
from mcp_app.services import limits, resp

pytestmark = pytest.mark.django_db

APP = Path(__file__).resolve().parents[2] / "mcp_app"
CALL = re.compile(r"redis\.call\(")


def _scripts() -> Iterator[tuple[str, str]]:
    """(where, source) of every Lua script in mcp_app: string constants that call Redis."""
    for path in sorted(APP.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and CALL.search(node.value)
            ):
                yield f"{path.relative_to(APP.parent)}:{node.lineno}", node.value


def _arguments(source: str, start: int) -> list[str]:
    """The arguments of the call whose "(" is just before ``start``, as Lua text."""
    args, depth, current = [], 0, []
    for char in source[start:]:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            if depth == 0:
                args.append("".join(current).strip())
                return args
            depth -= 1
        elif char == "," and depth == 0:
            args.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    raise AssertionError(f"unclosed redis.call in {source!r}")


def _key_positions(client: redis.Redis, command: str, argc: int) -> list[int]:
    """Which of a command's arguments (1 = the first after its name) are keys, per Redis."""
    info = client.execute_command("COMMAND", "INFO", command)[command.lower()]
    first, last = int(info["first_key_pos"]), int(info["last_key_pos"])
    step = int(info["step_count"])
    if first == 0:
        return []
    last = argc + last if last < 0 else last
    return list(range(first, last + 1, step or 1))


def test_every_script_passes_only_declared_keys_to_redis() -> None:
    client = redis.Redis.from_url(settings.REDIS_URL, decode_responses=True)
    scripts = list(_scripts())
    # The limiter's three and the SSE event store's one, at least.
    assert len(scripts) >= 4, scripts
    undeclared = []
    try:
        for where, source in scripts:
            for match in CALL.finditer(source):
                args = _arguments(source, match.end())
                command = ast.literal_eval(args[0].replace("'", '"'))
                for position in _key_positions(client, command, len(args) - 1):
                    if position < len(args) and not re.fullmatch(r"KEYS\[[^\]]+\]", args[position]):
                        undeclared.append(f"{where}: {command} {args[position]}")
    finally:
        client.close()
    assert undeclared == []


def _exact(key: str) -> str:
    """An ACL key pattern that matches ``key`` only."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", key)


@pytest.fixture
def declared_keys_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    """Run every limiter script as a Redis user allowed only the keys that run declares.

    Redis checks a script's commands against the user's key patterns (NOPERM otherwise).
    Yields the keys of each run.
    """
    admin = redis.Redis.from_url(settings.REDIS_URL)
    runs: list[list[str]] = []
    original = resp.Client.evalsha
    base = settings.REDIS_URL.split("://", 1)[1]

    async def evalsha(self: resp.Client, script: resp.Script, keys: Any, args: Any) -> Any:
        user = f"script-keys-{secrets.token_hex(4)}"
        declared = [key.decode() if isinstance(key, bytes) else str(key) for key in keys]
        runs.append(declared)
        admin.acl_setuser(
            user,
            enabled=True,
            reset=True,
            passwords=["+probe"],
            commands=["+@all"],
            keys=[_exact(key) for key in declared],
        )
        probe = resp.Client(f"redis://{user}:probe@{base}", self.timeout)
        try:
            return await original(probe, script, keys, args)
        finally:
            probe.drop()
            admin.acl_deluser(user)

    monkeypatch.setattr(resp.Client, "evalsha", evalsha)
    try:
        yield runs
    finally:
        admin.close()


async def test_a_task_frees_the_slots_handed_to_it_touching_only_declared_keys(
    declared_keys_only: list[list[str]],
) -> None:
    row = RateLimit(max_concurrent=1)
    row.pk = secrets.randbelow(10**9) + 10**6
    rule = limits.Rule.of(row)
    call_id = secrets.token_hex(8)

    async def admit() -> limits.Lease | limits.Refusal:
        return await limits.aadmit(
            limits=[rule], method="tools/call", target="echo", subject=lambda: "addr:10.0.0.1"
        )

    lease = await admit()
    assert isinstance(lease, limits.Lease) and lease.keys
    await lease.ahand_over(call_id)
    refused = await admit()
    assert isinstance(refused, limits.Refusal) and refused.reason == "concurrency"
    await limits.abackground_call_ended(call_id)
    # The task's slot is free again: the cap admits a call.
    assert isinstance(await admit(), limits.Lease)
    # Every script ran as the restricted user (admit, hand-over, admit, task ended, admit).
    assert len(declared_keys_only) == 5
    assert lease.keys[0] in declared_keys_only[3]
