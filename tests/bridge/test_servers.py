"""The stdio allow-list (``MCP_STDIO_SERVERS``): parsed strictly, and what an operator may add.

Pure: no database, no process.
"""

from __future__ import annotations

import json

import pytest

from mcp_app.bridge.servers import (
    AllowListError,
    Limits,
    NotAllowed,
    bridge_secret,
    check_request,
    child_env,
    parse_allow_list,
)

FULL = {
    "files": {
        "command": ["npx", "-y", "server-filesystem"],
        "args": ["/data", "--mode=*"],
        "env": {"LOG_LEVEL": "info"},
        "credential_env": ["API_TOKEN"],
        "cwd": "/srv",
        "cwd_allowed": ["/srv/a"],
        "memory_mb": 512,
        "cpu_seconds": 60,
        "open_files": 100,
    }
}


def test_an_empty_setting_allows_nothing() -> None:
    assert parse_allow_list("") == {}
    assert parse_allow_list("  ") == {}


def test_every_key_is_read() -> None:
    server = parse_allow_list(json.dumps(FULL))["files"]
    assert server.command == ("npx", "-y", "server-filesystem")
    assert server.env == {"LOG_LEVEL": "info"}
    assert server.credential_env == ("API_TOKEN",)
    assert (server.cwd, server.cwd_allowed) == ("/srv", ("/srv/a",))
    assert server.limits == Limits(memory_mb=512, cpu_seconds=60, open_files=100)


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("{not json", "MCP_STDIO_SERVERS is not valid JSON"),
        ("[]", "must be a JSON object of servers by name"),
        ('{"a b": {"command": ["x"]}}', "a server name is letters"),
        ('{"x": []}', "MCP_STDIO_SERVERS['x'] must be an object"),
        ('{"x": {}}', "MCP_STDIO_SERVERS['x'].command must be a list of strings"),
        ('{"x": {"command": []}}', "command must name the program"),
        ('{"x": {"command": "npx server"}}', "command must be a list of strings"),
        ('{"x": {"command": ["x"], "shell": true}}', "unknown keys shell"),
        ('{"x": {"command": ["x"], "env": {"A-B": "1"}}}', "env must map variable names"),
        ('{"x": {"command": ["x"], "credential_env": ["1A"]}}', "must list variable names"),
        ('{"x": {"command": ["x"], "memory_mb": 0}}', "memory_mb must be a positive integer"),
        ('{"x": {"command": ["x"], "cpu_seconds": true}}', "cpu_seconds must be a positive"),
    ],
)
def test_a_bad_allow_list_is_refused_saying_where(raw: str, says: str) -> None:
    with pytest.raises(AllowListError) as refused:
        parse_allow_list(raw)
    assert says in str(refused.value)


@pytest.mark.parametrize(
    ("args", "cwd", "env", "part"),
    [
        (["/data", "--mode=ro"], "", [], None),
        (["--mode="], "/srv/a", ["API_TOKEN"], None),
        (["/data2"], "", [], "args"),
        (["--mod"], "", [], "args"),
        (["/data; rm -rf /"], "", [], "args"),
        ([], "/", [], "cwd"),
        ([], "", ["PATH"], "env"),
    ],
)
def test_an_operator_may_add_only_what_is_offered(
    args: list[str], cwd: str, env: list[str], part: str | None
) -> None:
    server = parse_allow_list(FULL)["files"]
    if part is None:
        check_request(server, args=args, cwd=cwd, env_names=env)
        return
    with pytest.raises(NotAllowed) as refused:
        check_request(server, args=args, cwd=cwd, env_names=env)
    assert refused.value.part == part


def test_the_child_environment_is_only_path_home_lang_and_the_configured() -> None:
    server = parse_allow_list(FULL)["files"]
    bridge = {"PATH": "/bin", "HOME": "/h", "DATABASE_URL": "postgres://x", "SECRET_KEY": "k"}
    env = child_env(server, bridge, {"API_TOKEN": "t"})
    assert env == {
        "PATH": "/bin", "HOME": "/h", "LANG": "C.UTF-8", "LOG_LEVEL": "info", "API_TOKEN": "t",
    }  # fmt: skip


def test_the_bridge_secret_is_the_configured_one_or_derived_from_secret_key() -> None:
    assert bridge_secret("given", "key") == "given"
    derived = bridge_secret("", "key")
    assert derived == bridge_secret("", "key") != bridge_secret("", "other key")
    assert "key" not in derived
