"""What a test's code connected to, and the DNS it was told: the SSRF guard observed at the edge.

``connections`` is a fixture recording every ``socket.connect`` of this process while the test
runs (a PEP 578 audit hook), so "refused before any connection attempt" is observed at the
socket, not inferred from an error message. ``Dns`` is a resolver the test controls, installed
with ``netguard.resolver_used``: a name answers what the test says, and may answer differently
later (DNS rebinding), with no lookup leaving the process.
"""

from __future__ import annotations

import ipaddress
import socket
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from mcp_app.executors.netguard import IPAddress

_recording: list[list[Any]] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.connect" and _recording:
        _recording[-1].append(args[1])


sys.addaudithook(_audit)  # hooks cannot be removed; it records only inside ``connections``


@pytest.fixture
def connections() -> Iterator[list[Any]]:
    """The addresses this test connected sockets to."""
    seen: list[Any] = []
    _recording.append(seen)
    yield seen
    _recording.remove(seen)


class Dns:
    """A resolver answering each name from the test's table; ``asked`` lists the lookups."""

    def __init__(self, answers: Mapping[str, Sequence[str]]) -> None:
        self.answers = {name: list(addresses) for name, addresses in answers.items()}
        self.asked: list[str] = []

    def answer(self, name: str, *addresses: str) -> None:
        """Answer ``name`` with ``addresses`` from now on (the rebinding of a name)."""
        self.answers[name] = list(addresses)

    async def __call__(self, host: str, port: int) -> list[IPAddress]:
        self.asked.append(host)
        if host not in self.answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [ipaddress.ip_address(address) for address in self.answers[host]]
