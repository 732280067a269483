"""The Streamable HTTP transport: the ASGI app behind /mcp/<slug>. Knows HTTP, not MCP methods."""
