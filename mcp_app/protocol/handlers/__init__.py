"""MCP method handlers, one module per spec area.

Each handler is ``async def handle_<method>(ctx: RequestContext, params: <Params>) -> dict``:
params arrive already validated (``messages.py``), the result is shaped for ``ctx.version``
but without the modern envelope, which ``dispatch.py`` adds. Handlers raise ``McpError``
subclasses for protocol errors.
"""
