"""The audit UI at /audit/: search, inspect, follow live, chart and export the call log.

``forms`` parses the shareable GET filters, ``selectors`` turns them into indexed, keyset
queries and statistics, ``charts`` draws those as inline SVG, ``views`` only glues them to
templates. Nothing here writes: records come from ``services.calllog``.
"""
