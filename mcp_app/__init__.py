"""mcp_app: admin-managed MCP endpoints (catalog, protocol, transport, executors)."""
