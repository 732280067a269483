"""The call log: one row per MCP message, written off the request path.

- ``recorder``: what one HTTP request did (event-loop side, no I/O), and try-it's record.
- ``capture``: each tool's capture policy, redaction and the safe-text rules (pure).
- ``writer``: the per-process thread that batches records into COPY / INSERT.
- ``partitions``: the table's time partitions on PostgreSQL (upgrade, upkeep, dropping).
- ``retention``: dropping whole partitions past the window, deleting the rest in chunks.
"""
