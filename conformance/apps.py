"""App config: only so that ``load_conformance_fixtures`` is a management command."""

from django.apps import AppConfig


class ConformanceConfig(AppConfig):
    name = "conformance"
    verbose_name = "MCP conformance fixtures"
