"""OAuth client housekeeping: self-registered clients that were never used.

Every MCP client install registers anew through DCR, and most registrations are abandoned
(the user never finishes signing in, or the client registers again next time). A
registration is stale when it is older than the cutoff and no user ever got a grant or a token
through it; its own registration-management token does not count.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_refresh_token_model,
)


def stale_registrations(*, older_than: timedelta) -> QuerySet[Any]:
    Application = get_application_model()
    used = (
        get_access_token_model().objects.filter(user__isnull=False).values("application_id"),
        get_refresh_token_model().objects.values("application_id"),
        get_grant_model().objects.values("application_id"),
    )
    # DOT's swappable models are untyped: the row type is Any.
    stale: QuerySet[Any] = Application.objects.filter(
        registration_source=Application.RegistrationSource.DCR,
        created__lt=timezone.now() - older_than,
    )
    for subquery in used:
        stale = stale.exclude(pk__in=subquery)
    return stale


@transaction.atomic
def purge_stale_registrations(*, older_than: timedelta) -> int:
    """Delete stale DCR registrations (with their registration tokens); return how many."""
    Application = get_application_model()
    ids = list(stale_registrations(older_than=older_than).values_list("pk", flat=True))
    Application.objects.filter(pk__in=ids).delete()
    return len(ids)


def client_name(client_id: str) -> str:
    """Return the registered name of the OAuth client ``client_id``, or "" if unknown."""
    if not client_id:
        return ""
    Application = get_application_model()
    name = Application.objects.filter(client_id=client_id).values_list("name", flat=True).first()
    return name or ""


def client_names(client_ids: list[str]) -> dict[str, str]:
    """Return the registered names of the OAuth clients ``client_ids`` (unknown ids left out)."""
    Application = get_application_model()
    found = Application.objects.filter(client_id__in=client_ids).values_list("client_id", "name")
    return dict(found)


def client_ids_named(name: str) -> QuerySet[Any]:
    """The ids of the OAuth clients registered under ``name`` (any case), as a subquery."""
    Application = get_application_model()
    ids: QuerySet[Any] = Application.objects.filter(name__iexact=name).values("client_id")
    return ids
