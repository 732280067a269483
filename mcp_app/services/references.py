"""Who uses a row: the one rule per model that decides whether deleting it is refused.

The API (409), the admin (its delete page and "delete selected" action) and catalog import
with ``prune`` all ask ``references_to`` before deleting, so the three agree. What counts:

- a credential: upstreams whose ``credential`` it is or whose ``stdio_env`` names it, and
  HTTP tools naming it in ``config.credential``;
- an upstream: ``mcp_upstream`` tools naming it in ``config.upstream``, and resources,
  resource templates and prompts whose ``upstream`` it is;
- a group: tools, resources, resource templates and prompts listing it in
  ``allowed_groups`` (deleting it would silently open them to every signed-in user);
- a resource: tools linking it as their MCP Apps view (``ui_resource_uri``); a linked view
  cannot change its URI either (``catalog_writes``), so a link never dangles;
- an endpoint, while it is enabled: its live sessions and its unfinished background calls
  (clients are connected to it). A disabled endpoint serves nobody, so disabling it first is
  how an operator deletes it anyway.

Tools name credentials and upstreams inside their JSON config, and stdio upstreams name
credentials in ``stdio_env``, which no foreign key protects:
that is why this module exists. Other rows (tools, templates, prompts) are never "in use".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth.models import Group
from django.db.models import Model
from django.utils import timezone

from mcp_app.conf import get_conf
from mcp_app.models import (
    BackgroundCall,
    Credential,
    Endpoint,
    Prompt,
    Resource,
    ResourceTemplate,
    Session,
    Tool,
    Upstream,
)


@dataclass(frozen=True)
class Reference:
    """One row that uses the row being deleted, and how (the field that names it)."""

    model: type[Model]
    pk: object
    name: str
    via: str

    @property
    def kind(self) -> str:
        return str(self.model._meta.verbose_name)

    def __str__(self) -> str:
        return f"{self.kind} {self.name!r} ({self.via})"


class RowInUseError(Exception):
    """Deleting ``row`` was refused: ``references`` still use it."""

    def __init__(self, row: Model, references: list[Reference]) -> None:
        self.row = row
        self.references = references
        super().__init__(in_use_message(row, references))


def in_use_message(row: Model, references: list[Reference], limit: int = 10) -> str:
    """Return "The <kind> 'x' is still used by: ...; nothing was deleted." naming the users."""
    named = "; ".join(str(reference) for reference in references[:limit])
    more = len(references) - limit
    if more > 0:
        named += f"; and {more} more"
    kind = row._meta.verbose_name
    return f"The {kind} {str(row)!r} is still used by: {named}. Nothing was deleted."


def credential_references(*, credential: Credential) -> list[Reference]:
    """Return the upstreams and HTTP tools that use ``credential``."""
    upstreams = Upstream.objects.filter(credential=credential).order_by("name")
    tools = Tool.objects.filter(kind=Tool.Kind.HTTP, config__credential=credential.name)
    # A stdio upstream names credentials as the values of its stdio_env (few rows: checked here).
    stdio = [
        (row, variable)
        for row in Upstream.objects.filter(transport=Upstream.Transport.STDIO).order_by("name")
        for variable, name in sorted(row.stdio_env.items())
        if name == credential.name
    ]
    return [
        *(Reference(Upstream, row.pk, row.name, "credential") for row in upstreams),
        *(Reference(Upstream, row.pk, row.name, f"stdio_env.{var}") for row, var in stdio),
        *(
            Reference(Tool, row.pk, row.name, "config.credential")
            for row in tools.order_by("name", "pk")
        ),
    ]


def upstream_references(*, upstream: Upstream) -> list[Reference]:
    """Return the tools, resources, resource templates and prompts that use ``upstream``."""
    tools = Tool.objects.filter(kind=Tool.Kind.MCP_UPSTREAM, config__upstream=upstream.name)
    return [
        *(
            Reference(Tool, row.pk, row.name, "config.upstream")
            for row in tools.order_by("name", "pk")
        ),
        *(
            Reference(Resource, row.pk, row.uri, "upstream")
            for row in Resource.objects.filter(upstream=upstream).order_by("uri")
        ),
        *(
            Reference(ResourceTemplate, row.pk, row.uri_template, "upstream")
            for row in ResourceTemplate.objects.filter(upstream=upstream).order_by("uri_template")
        ),
        *(
            Reference(Prompt, row.pk, row.name, "upstream")
            for row in Prompt.objects.filter(upstream=upstream).order_by("name")
        ),
    ]


def group_references(*, group: Group) -> list[Reference]:
    """Return the catalog rows whose ``allowed_groups`` list ``group``."""
    return [
        *(
            Reference(Tool, row.pk, row.name, "allowed_groups")
            for row in Tool.objects.filter(allowed_groups=group).order_by("name", "pk")
        ),
        *(
            Reference(Resource, row.pk, row.uri, "allowed_groups")
            for row in Resource.objects.filter(allowed_groups=group).order_by("uri")
        ),
        *(
            Reference(ResourceTemplate, row.pk, row.uri_template, "allowed_groups")
            for row in ResourceTemplate.objects.filter(allowed_groups=group).order_by(
                "uri_template"
            )
        ),
        *(
            Reference(Prompt, row.pk, row.name, "allowed_groups")
            for row in Prompt.objects.filter(allowed_groups=group).order_by("name")
        ),
    ]


def endpoint_references(*, endpoint: Endpoint) -> list[Reference]:
    """Return the live sessions and unfinished background calls of an enabled endpoint."""
    if not endpoint.enabled:
        return []
    # Live as services.sessions counts it: not closed, used within the idle timeout.
    idle = timedelta(seconds=get_conf().MCP_SESSION_IDLE_SECONDS)
    sessions = Session.objects.filter(
        endpoint=endpoint, closed_at__isnull=True, last_seen_at__gte=timezone.now() - idle
    ).order_by("created_at", "id")
    calls = BackgroundCall.objects.filter(
        endpoint=endpoint, status__in=BackgroundCall.ACTIVE
    ).order_by("created_at", "id")
    return [
        *(Reference(Session, row.pk, row.client_name, "live session") for row in sessions),
        *(
            Reference(BackgroundCall, row.pk, row.tool_name, f"{row.status} background call")
            for row in calls
        ),
    ]


def view_references(*, resource: Resource) -> list[Reference]:
    """Return the tools that link ``resource`` as their MCP Apps view."""
    return [
        Reference(Tool, row.pk, row.name, "links it as its view")
        for row in Tool.objects.filter(ui_resource_uri=resource.uri).order_by("name", "pk")
    ]


def references_to(row: Model) -> list[Reference]:
    """Return what still uses ``row`` (empty: deleting it is allowed)."""
    if isinstance(row, Credential):
        return credential_references(credential=row)
    if isinstance(row, Upstream):
        return upstream_references(upstream=row)
    if isinstance(row, Group):
        return group_references(group=row)
    if isinstance(row, Endpoint):
        return endpoint_references(endpoint=row)
    if isinstance(row, Resource):
        return view_references(resource=row)
    return []


def ensure_unused(row: Model) -> None:
    """Check that nothing uses ``row``, before deleting it.

    Raises:
        RowInUseError: something does; it names them.
    """
    references = references_to(row)
    if references:
        raise RowInUseError(row, references)
