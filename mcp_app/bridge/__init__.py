"""The stdio bridge: stdio MCP servers served as Streamable HTTP upstreams.

``servers`` reads the administrator's allow-list (``MCP_STDIO_SERVERS``) and checks what an
operator asks of it; ``children`` starts, watches and stops one child process; ``app`` is the
ASGI app of ``manage.py mcp_stdio_bridge``, one child per upstream MCP session. Nothing here
reads rows: the management command hands the app a launcher (``services.stdio``) that turns
an upstream's name into the exact process to start.
"""
