"""``manage.py check`` on the stdio settings: an invalid allow-list fails it, allowed servers
without a bridge warn."""

from __future__ import annotations

from django.test import override_settings

from mcp_app.checks import check_stdio_servers

SERVERS = '{"files": {"command": ["server-files"]}}'


@override_settings(MCP_STDIO_SERVERS='{"files": {"command": "server-files"}}')
def test_an_invalid_allow_list_is_a_check_error() -> None:
    [error] = check_stdio_servers()
    assert error.id == "mcp_app.E020"
    assert "MCP_STDIO_SERVERS['files'].command must be a list of strings" in error.msg


@override_settings(MCP_STDIO_SERVERS=SERVERS, MCP_STDIO_BRIDGE_URL="")
def test_allowed_servers_without_a_bridge_warn() -> None:
    assert [message.id for message in check_stdio_servers()] == ["mcp_app.W020"]


@override_settings(MCP_STDIO_SERVERS=SERVERS, MCP_STDIO_BRIDGE_URL="http://bridge:8765")
def test_allowed_servers_with_a_bridge_pass() -> None:
    assert check_stdio_servers() == []


@override_settings(MCP_STDIO_SERVERS="", MCP_STDIO_BRIDGE_URL="")
def test_no_stdio_settings_pass() -> None:
    assert check_stdio_servers() == []
