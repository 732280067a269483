"""Rate limit admin: limits are saved through the write path; a quota shows its current use."""

from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html_join

from mcp_app.admin.writes import SettingRowAdmin
from mcp_app.models import RateLimit
from mcp_app.services.limits import quota_usage


@admin.register(RateLimit)
class RateLimitAdmin(SettingRowAdmin):
    list_display = ["__str__", "endpoint", "scope", "enabled", "on_redis_down", "updated_at"]
    list_filter = ["enabled", "scope", "target_kind", "on_redis_down"]
    list_select_related = ["endpoint"]
    search_fields = ["endpoint__slug", "target_name", "description"]
    autocomplete_fields = ["endpoint"]
    readonly_fields = ["quota_use", "created_at", "updated_at"]
    fieldsets = [
        (None, {"fields": ["endpoint", "description", "enabled", "scope"]}),
        ("Which calls", {"fields": ["target_kind", "target_name"]}),
        ("Rate", {"fields": ["rate", "window", "burst"]}),
        ("Concurrency", {"fields": ["max_concurrent"]}),
        ("Quota", {"fields": ["quota", "quota_period", "quota_use"]}),
        ("When Redis is unreachable", {"fields": ["on_redis_down"]}),
        ("History", {"fields": ["created_at", "updated_at"]}),
    ]

    @admin.display(description="used this period")
    def quota_use(self, limit: RateLimit) -> str:
        if limit.pk is None or limit.quota is None:
            return "no quota"
        usage = quota_usage(limit)
        if usage is None:
            return "unknown: Redis is unreachable"
        if not usage:
            return f"nothing yet (of {limit.quota})"
        return format_html_join(
            "", "<div>{}: {} of {}</div>", ((u.subject, u.used, limit.quota) for u in usage)
        )
