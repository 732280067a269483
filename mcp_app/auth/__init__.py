"""OAuth 2.1 for MCP endpoints: the only package that knows django-oauth-toolkit.

The authorization server is DOT, configured in settings (``OAUTH2_PROVIDER``) and adjusted here:
``validators`` (resource indicators bound to our endpoints), ``scopes`` (per-endpoint scopes),
``views`` (metadata documents, consent, rate-limited registration, CORS), ``cimd`` (the client
metadata fetcher on our SSRF guard) and ``clients`` (purging unused registrations).
``resources`` derives every identifier from PUBLIC_BASE_URL. Each endpoint is a resource
server: ``bearer`` turns a request's token into a ``Principal`` for the transport, and
``access`` applies per-item scopes and groups. Operator notes: docs/auth.md.
"""
