"""Django model permissions per action: view to read, add/change/delete to write.

Custom actions name the permissions they need in the view's ``action_permissions``
(codename prefixes on the view's model, e.g. ``{"enable": ["change"]}``); a view's
``extra_permissions`` (full names) are needed for every action, as the call log's
"audit_calls" is for /audit/.
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import DjangoModelPermissions
from rest_framework.request import Request


class ModelPermissions(DjangoModelPermissions):
    perms_map = {
        **DjangoModelPermissions.perms_map,
        "GET": ["%(app_label)s.view_%(model_name)s"],
        "HEAD": ["%(app_label)s.view_%(model_name)s"],
        "OPTIONS": [],
    }

    def has_permission(self, request: Request, view: Any) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        if not request.user.has_perms(getattr(view, "extra_permissions", ())):
            return False
        needed = getattr(view, "action_permissions", {}).get(getattr(view, "action", None))
        if needed is None:
            return super().has_permission(request, view)
        meta = self._queryset(view).model._meta
        return request.user.has_perms(
            [f"{meta.app_label}.{codename}_{meta.model_name}" for codename in needed]
        )
