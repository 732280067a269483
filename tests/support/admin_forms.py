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
