"""Django model permissions per action: view to read, add/change/delete to write.

Custom actions name the permissions they need in the view's ``action_permissions``
(codename prefixes on the view's model, e.g. ``{"enable": ["change"]}``); a view's
``extra_permissions`` (full names) are needed for every action, as the call log's
"audit_calls" is for /audit/. A refusal (403) names the permissions missing.
"""

from __future__ import annotations

from collections.abc import Sequence
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
        model = self._queryset(view).model
        needed = getattr(view, "action_permissions", {}).get(getattr(view, "action", None))
        if needed is None:
            if request.method not in self.perms_map:
                allowed: bool = super().has_permission(request, view)  # 405: unknown method
                return allowed
            names = self.get_required_permissions(request.method, model)
        else:
            meta = model._meta
            names = [f"{meta.app_label}.{codename}_{meta.model_name}" for codename in needed]
        missing = missing_permissions(request, [*getattr(view, "extra_permissions", ()), *names])
        if missing:
            # The 403 names what is missing, as the catalog's import and export do.
            self.message = denied_message(missing)
            return False
        return True


def missing_permissions(request: Request, names: Sequence[str]) -> list[str]:
    """The permissions among ``names`` the request's user lacks, in order."""
    return [name for name in names if not request.user.has_perm(name)]


def denied_message(missing: Sequence[str]) -> str:
    return f"This request needs permissions you do not have: {', '.join(missing)}."
