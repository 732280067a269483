"""The MCP protocol core: pure Python, no Django, no Channels, no Celery.

Everything the wire needs lives here (JSON-RPC, revisions and eras, the 2026-07-28 request
ladder, result shaping, cursors, URI templates, SSE framing, method handlers). It reaches the
rest of the product only through the ports in ``ports.py`` and the plain data in
``catalog.py``, so every rule can be tested with in-memory fakes.
"""
