"""Fixtures of the official MCP conformance suite, as ordinary catalog rows and python tools.

Nothing in the server knows about the suite: ``load_conformance_fixtures`` creates an endpoint
with tools, resources, templates and prompts through the same services an operator's admin
edits use, and ``conformance.tools`` is an ordinary module of python tool functions, enabled
like any operator's module by listing it in ``MCP_PYTHON_TOOL_MODULES``.
"""
