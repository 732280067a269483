"""The capture policy as pure functions: redaction, metadata shape, the byte cap."""

from __future__ import annotations

import orjson

from mcp_app.models import Tool
from mcp_app.services.calllog.capture import (
    CapturePolicy,
    capture_call,
    describe,
    parse_redact_names,
    secret_fields_of_schema,
)

FULL = CapturePolicy(mode=Tool.Capture.FULL, max_bytes=4096)


def test_secret_looking_names_are_redacted_at_any_depth():
    arguments = {
        "query": "weather",
        "auth": {"Authorization": "Bearer abc.def", "X-Api-Key": "k-1234567"},
        "items": [{"password": "hunter22"}, {"refresh_token": "r-99999"}],
    }
    stored, _result = capture_call(arguments, None, FULL, frozenset())
    assert stored.value == {
        "query": "weather",
        "auth": {"Authorization": "[redacted]", "X-Api-Key": "[redacted]"},
        "items": [{"password": "[redacted]"}, {"refresh_token": "[redacted]"}],
    }


def test_listed_and_schema_secret_fields_are_redacted_and_scrubbed_from_the_result():
    schema = {
        "type": "object",
        "properties": {
            "pin": {"type": "string", "writeOnly": True},
            "nested": {"type": "object", "properties": {"pw": {"format": "password"}}},
        },
    }
    secret_fields = secret_fields_of_schema(schema)
    assert secret_fields == {"pin", "pw"}
    policy = CapturePolicy(Tool.Capture.FULL, 4096, parse_redact_names("ssn,\n email "))
    arguments = {"pin": "1234-5678", "nested": {"pw": "pass-word"}, "email": "a@b.c", "n": 1}
    result = {"content": [{"type": "text", "text": "pin 1234-5678 for a@b.c ok"}]}
    args, res = capture_call(arguments, result, policy, secret_fields)
    assert args.value == {
        "pin": "[redacted]",
        "nested": {"pw": "[redacted]"},
        "email": "[redacted]",
        "n": 1,
    }
    assert res.value["content"][0]["text"] == "pin [redacted] for [redacted] ok"


def test_metadata_keeps_names_types_and_sizes_only():
    arguments = {"name": "Ada", "age": 36, "tags": ["a", "b"], "ok": True, "extra": None,
                 "deep": {"a": {"b": {"c": 1}}}}  # fmt: skip
    stored, _ = capture_call(arguments, None, CapturePolicy(), frozenset())
    assert stored.value == {
        "name": "<string>",
        "age": "<number>",
        "tags": "<array of 2>",
        "ok": "<boolean>",
        "extra": "<null>",
        "deep": {"a": {"b": "<object of 1 keys>"}},
    }
    assert stored.size == len(orjson.dumps(arguments))
    assert describe("x") == "<string>"


def test_full_capture_over_the_cap_is_cut_after_redaction():
    policy = CapturePolicy(Tool.Capture.FULL, 32)
    arguments = {"token": "t" * 100, "text": "y" * 100}
    stored, _ = capture_call(arguments, None, policy, frozenset())
    assert stored.truncated
    assert stored.value["head"] == '{"token":"[redacted]","text":"yy'
    assert "t" * 10 not in stored.value["head"]
    assert stored.size == stored.value["bytes"]


def test_capture_none_keeps_nothing():
    args, res = capture_call({"a": 1}, {"b": 2}, CapturePolicy(Tool.Capture.NONE), frozenset())
    assert (args.value, args.size, res.value, res.size) == (None, None, None, None)
