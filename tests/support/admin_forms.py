"""Admin form posts as a browser sends them, for tests that drive the admin."""

from __future__ import annotations

from typing import Any


def tool_form(endpoint_id: int, **overrides: str) -> dict[str, Any]:
    """The add/change form of a template tool "shout" published on ``endpoint_id``."""
    data = {
        "name": "shout",
        "title": "Shout",
        "description": "Repeats a word in capitals.",
        "enabled": "on",
        "kind": "template",
        "function": "",
        "template": "{{ word|upper }}!",
        "template_output": "text",
        "input_schema": '{"type": "object", "properties": {"word": {"type": "string"}},'
        ' "required": ["word"]}',
        "output_schema": "",
        "read_only_hint": "true",
        "destructive_hint": "unknown",
        "idempotent_hint": "unknown",
        "open_world_hint": "unknown",
        "icons": "[]",
        "meta": "{}",
        "execution_mode": "inline",
        "task_support": "optional",
        "soft_time_limit": "",
        "hard_time_limit": "",
        "endpoints": [str(endpoint_id)],
    }
    data.update(overrides)
    return data


def upstream_form(**overrides: Any) -> dict[str, Any]:
    """The add/change form of a Streamable HTTP upstream "peer", every field as posted."""
    data: dict[str, Any] = {
        "name": "peer",
        "description": "",
        "transport": "http",
        "url": "https://peer.example.com/mcp",
        "credential": "",
        "enabled": "on",
        "stdio_server": "",
        "stdio_args": "[]",
        "stdio_cwd": "",
        "stdio_env": "{}",
        "auth_mode": "credential",
        "oauth_client_id": "",
        "oauth_client_secret": "",
        "oauth_scopes": "",
        "forward_headers": "",
        "sync_policy": "mark",
        "connect_timeout": "5",
        "call_timeout": "60",
        "allow_networks": "",
        "session_idle_seconds": "600",
        "max_sessions": "100",
        "failure_threshold": "5",
        "cooldown_seconds": "30",
        "probe_interval_seconds": "300",
        "probe_timeout": "10",
        "unhealthy_threshold": "3",
    }
    data.update(overrides)
    return data
