"""Running the product as a service: health and readiness, worker heartbeats, upkeep jobs.

An interface layer like ``transport``: it reads through ``services`` and models and writes no
rows of its own (upkeep jobs call the same code as the management commands).
"""
