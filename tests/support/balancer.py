"""A round-robin TCP balancer on loopback, in front of several web processes.

Each new client connection goes to the next backend in turn, as a load balancer without
sticky sessions would send it, so a client's requests land on different processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator, Sequence
from itertools import cycle
from urllib.parse import urlsplit

from tests.support.live import free_port


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


@contextlib.contextmanager
def round_robin(backends: Sequence[str], log: list[str] | None = None) -> Iterator[str]:
    """Serve ``http://127.0.0.1:<port>`` spreading connections over ``backends`` (base URLs).

    ``log``, when given, gets the ``host:port`` of the backend each connection went to.
    """
    targets = cycle(
        [(urlsplit(b).hostname or "127.0.0.1", urlsplit(b).port or 80) for b in backends]
    )
    port = free_port()
    loop = asyncio.new_event_loop()
    started = threading.Event()
    stopping: asyncio.Event | None = None

    async def handle(
        client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter
    ) -> None:
        host, backend_port = next(targets)
        if log is not None:
            log.append(f"{host}:{backend_port}")
        try:
            backend_reader, backend_writer = await asyncio.open_connection(host, backend_port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(
            _pipe(client_reader, backend_writer), _pipe(backend_reader, client_writer)
        )

    async def serve() -> None:
        nonlocal stopping
        stopping = asyncio.Event()
        server = await asyncio.start_server(handle, "127.0.0.1", port)
        started.set()
        await stopping.wait()
        server.close()
        # Connections still open (idle keep-alives, streams) end with the balancer.
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await server.wait_closed()

    thread = threading.Thread(target=lambda: loop.run_until_complete(serve()), daemon=True)
    thread.start()
    started.wait(10)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        if stopping is not None:
            loop.call_soon_threadsafe(stopping.set)
        thread.join(10)
        loop.close()
