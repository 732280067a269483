"""SSE frames: plain events, multi-line data, priming events and keep-alives."""

from __future__ import annotations

import pytest

from mcp_app.protocol.sse import encode_event, keepalive, priming_event


def test_message_event_has_event_and_data_lines_and_a_blank_line() -> None:
    assert encode_event(b'{"a":1}') == b'event: message\ndata: {"a":1}\n\n'


def test_event_id_and_retry_come_before_the_data() -> None:
    frame = encode_event(b"x", event_id="s7-1", retry_ms=3000)
    assert frame == b"id: s7-1\nevent: message\nretry: 3000\ndata: x\n\n"


def test_multi_line_data_becomes_one_data_line_per_line() -> None:
    frame = encode_event(b"one\ntwo\r\nthree\rfour", event=None)
    assert frame == b"data: one\ndata: two\ndata: three\ndata: four\n\n"


@pytest.mark.spec("2025-11-25", "basic/transports", "priming event: id and empty data")
def test_priming_event_is_an_id_a_retry_and_empty_data() -> None:
    assert priming_event("s7-0", 3000) == b"id: s7-0\nretry: 3000\ndata:\n\n"


def test_keepalive_is_a_comment_line() -> None:
    frame = keepalive()
    assert frame.startswith(b":")
    assert frame.endswith(b"\n\n")


@pytest.mark.parametrize("bad", ["a\nb", "a\rb", "a\0b"])
def test_ids_and_event_names_cannot_inject_lines(bad: str) -> None:
    with pytest.raises(ValueError):
        encode_event(b"x", event_id=bad)
    with pytest.raises(ValueError):
        encode_event(b"x", event=bad)
