"""Django's group admin, with delete protection: a group that catalog rows list in
``allowed_groups`` is not deleted (that would open those rows to every signed-in user)."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.admin import GroupAdmin as DjangoGroupAdmin
from django.contrib.auth.models import Group

from mcp_app.admin.protection import InUseProtectedAdmin

# Registered by django.contrib.auth's admin, which is installed (and loaded) first.
if admin.site.is_registered(Group):
    admin.site.unregister(Group)


@admin.register(Group)
class GroupAdmin(InUseProtectedAdmin, DjangoGroupAdmin):
    pass
