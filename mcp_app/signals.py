"""Catalog change receivers: every edit of what an endpoint publishes bumps its catalog version.

Edits come from the admin, the shell, fixtures and services alike, so they are caught here with
model signals (style.md section 5, the one exception to "no logic in signals"). Receivers only
call services: ``services.catalog_changes``, naming which list changed so connected clients hear of
it, and ``services.history``, recording what an endpoint publishes; they also guard tool
names, which must stay unique per endpoint.
"""

from __future__ import annotations

from typing import Any

from django.db.models.signals import m2m_changed, post_delete, post_save, pre_delete, pre_save
from django.dispatch import receiver
from simple_history.signals import pre_create_historical_record

from mcp_app.models import (
    Endpoint,
    MembershipChange,
    Policy,
    Prompt,
    PromptArgument,
    PromptMessage,
    RateLimit,
    Resource,
    ResourceTemplate,
    Tool,
    Upstream,
)
from mcp_app.services import history, invalidation, notify
from mcp_app.services.catalog_changes import catalog_changed, endpoint_ids_for
from mcp_app.services.catalog_writes import (
    check_tools_attachable,
    check_unique_tool_names,
    rows_attached,
)
from mcp_app.services.limits import limits_changed
from mcp_app.services.upstream_targets import upstream_renamed

# Which endpoint_ids_for() keyword finds the endpoints of each catalog model.
_RELATION_KWARG: dict[type, str] = {
    Tool: "tool_ids",
    Resource: "resource_ids",
    ResourceTemplate: "template_ids",
    Prompt: "prompt_ids",
}
# Which list each catalog model belongs to, for notifications/<kind>/list_changed.
_KIND: dict[type, notify.CatalogKind] = {
    Tool: "tools",
    Resource: "resources",
    ResourceTemplate: "resources",
    Prompt: "prompts",
}
# Attribute holding the endpoint ids captured before a delete.
_CAPTURED = "_mcp_endpoint_ids"
# Attribute holding the (endpoint, item) pairs a remove() or clear() is about to detach.
_DETACHING = "_mcp_detaching_pairs"
# Attribute holding an upstream's name before a save.
_OLD_NAME = "_mcp_old_name"


def _endpoints_of(instance: Any) -> list[int]:
    return endpoint_ids_for(**{_RELATION_KWARG[type(instance)]: [instance.pk]})


@receiver(pre_save, sender=Tool, dispatch_uid="mcp_tool_rename_guard")
def _guard_tool_rename(sender: type[Tool], instance: Tool, raw: bool, **kwargs: Any) -> None:
    if raw or instance.pk is None:
        return
    check_unique_tool_names(
        endpoint_ids=_endpoints_of(instance), tools=[(instance.pk, instance.name)]
    )


@receiver(post_save, sender=Tool, dispatch_uid="mcp_tool_saved")
@receiver(post_save, sender=Resource, dispatch_uid="mcp_resource_saved")
@receiver(post_save, sender=ResourceTemplate, dispatch_uid="mcp_template_saved")
@receiver(post_save, sender=Prompt, dispatch_uid="mcp_prompt_saved")
def _catalog_row_saved(sender: type, instance: Any, created: bool, **kwargs: Any) -> None:
    # A new row is on no endpoint yet; it is published when attached (m2m_changed).
    if not created:
        catalog_changed(
            endpoint_ids=_endpoints_of(instance),
            kinds=[_KIND[sender]],
            # Saving a resource may change its content: its subscribers hear of it.
            updated_resource_uri=instance.uri if sender is Resource else None,
        )


@receiver(pre_delete, sender=Tool, dispatch_uid="mcp_tool_deleting")
@receiver(pre_delete, sender=Resource, dispatch_uid="mcp_resource_deleting")
@receiver(pre_delete, sender=ResourceTemplate, dispatch_uid="mcp_template_deleting")
@receiver(pre_delete, sender=Prompt, dispatch_uid="mcp_prompt_deleting")
def _catalog_row_deleting(sender: type, instance: Any, **kwargs: Any) -> None:
    # The m2m rows are gone by post_delete (and no m2m_changed is sent for them), so the
    # endpoints are captured, and the detaches recorded, now: inside the delete's transaction.
    through = history.through_of(sender)
    pairs = history.membership_pairs(through, instance, True, None)
    setattr(instance, _CAPTURED, [endpoint_id for endpoint_id, _ in pairs])
    history.record_membership(through, pairs, MembershipChange.Action.REMOVED)


@receiver(post_delete, sender=Tool, dispatch_uid="mcp_tool_deleted")
@receiver(post_delete, sender=Resource, dispatch_uid="mcp_resource_deleted")
@receiver(post_delete, sender=ResourceTemplate, dispatch_uid="mcp_template_deleted")
@receiver(post_delete, sender=Prompt, dispatch_uid="mcp_prompt_deleted")
def _catalog_row_deleted(sender: type, instance: Any, **kwargs: Any) -> None:
    catalog_changed(endpoint_ids=getattr(instance, _CAPTURED, ()), kinds=[_KIND[sender]])


@receiver(post_save, sender=PromptArgument, dispatch_uid="mcp_prompt_argument_saved")
@receiver(post_save, sender=PromptMessage, dispatch_uid="mcp_prompt_message_saved")
@receiver(post_delete, sender=PromptArgument, dispatch_uid="mcp_prompt_argument_deleted")
@receiver(post_delete, sender=PromptMessage, dispatch_uid="mcp_prompt_message_deleted")
def _prompt_part_changed(
    sender: type, instance: PromptArgument | PromptMessage, **kwargs: Any
) -> None:
    catalog_changed(
        endpoint_ids=endpoint_ids_for(prompt_ids=[instance.prompt_id]), kinds=["prompts"]
    )


@receiver(post_save, sender=Policy, dispatch_uid="mcp_policy_saved")
@receiver(post_delete, sender=Policy, dispatch_uid="mcp_policy_deleted")
def _policy_changed(sender: type[Policy], instance: Policy, **kwargs: Any) -> None:
    # The snapshot carries the endpoint's policies; no list changes, so nothing to announce.
    catalog_changed(endpoint_ids=[instance.endpoint_id])


@receiver(post_save, sender=Endpoint, dispatch_uid="mcp_endpoint_saved")
def _endpoint_saved(
    sender: type[Endpoint], instance: Endpoint, created: bool, **kwargs: Any
) -> None:
    # Title, description and instructions are part of the snapshot.
    if created:
        # Processes may remember the slug as unknown (404).
        invalidation.invalidate(slugs=[instance.slug])
    else:
        catalog_changed(endpoint_ids=[instance.pk])


@receiver(post_delete, sender=Endpoint, dispatch_uid="mcp_endpoint_deleted")
def _endpoint_deleted(sender: type[Endpoint], instance: Endpoint, **kwargs: Any) -> None:
    invalidation.invalidate(endpoint_ids=[instance.pk], slugs=[instance.slug])


@receiver(m2m_changed, sender=Endpoint.tools.through, dispatch_uid="mcp_endpoint_tools")
@receiver(m2m_changed, sender=Endpoint.resources.through, dispatch_uid="mcp_endpoint_resources")
@receiver(
    m2m_changed, sender=Endpoint.resource_templates.through, dispatch_uid="mcp_endpoint_templates"
)
@receiver(m2m_changed, sender=Endpoint.prompts.through, dispatch_uid="mcp_endpoint_prompts")
def _endpoint_catalog_changed(
    sender: type,
    instance: Any,
    action: str,
    reverse: bool,
    model: type,
    pk_set: set[int] | None,
    **kwargs: Any,
) -> None:
    if action == "pre_add" and sender is Endpoint.tools.through and pk_set:
        _guard_tool_attach(instance, reverse, pk_set)
    elif action in ("pre_remove", "pre_clear"):
        # remove() names pairs that may not exist and clear() names none: the history
        # records the pairs there are, captured before they go.
        pairs = history.membership_pairs(sender, instance, reverse, pk_set)
        instance.__dict__[_DETACHING] = pairs
    elif action == "post_add":
        history.record_membership(
            sender,
            history.attached_pairs(instance, reverse, pk_set or set()),
            MembershipChange.Action.ADDED,
        )
        endpoint_ids = (pk_set or ()) if reverse else [instance.pk]
        catalog_changed(endpoint_ids=endpoint_ids, kinds=[_M2M_KIND[sender]])
    elif action in ("post_remove", "post_clear"):
        pairs = instance.__dict__.pop(_DETACHING, [])
        history.record_membership(sender, pairs, MembershipChange.Action.REMOVED)
        endpoint_ids = [endpoint_id for endpoint_id, _ in pairs] if reverse else [instance.pk]
        catalog_changed(endpoint_ids=endpoint_ids, kinds=[_M2M_KIND[sender]])


@receiver(rows_attached, dispatch_uid="mcp_rows_attached")
def _rows_attached(sender: type, endpoint_ids: list[int], **kwargs: Any) -> None:
    # New rows inserted in bulk with their endpoints (catalog_writes.catalog_rows_create),
    # which checked names and wrote the membership history itself: as post_add does.
    catalog_changed(endpoint_ids=endpoint_ids, kinds=[_KIND[sender]])


_M2M_KIND: dict[type, notify.CatalogKind] = {
    Endpoint.tools.through: "tools",
    Endpoint.resources.through: "resources",
    Endpoint.resource_templates.through: "resources",
    Endpoint.prompts.through: "prompts",
}


def _guard_tool_attach(instance: Any, reverse: bool, pk_set: set[int]) -> None:
    if reverse:
        # tool.endpoints.add(*endpoints)
        check_unique_tool_names(endpoint_ids=pk_set, tools=[(instance.pk, instance.name)])
    else:
        # endpoint.tools.add(*tools)
        check_tools_attachable(endpoint_id=instance.pk, tool_ids=pk_set)


@receiver(pre_save, sender=Upstream, dispatch_uid="mcp_upstream_renaming")
def _upstream_renaming(
    sender: type[Upstream], instance: Upstream, raw: bool, **kwargs: Any
) -> None:
    if raw or instance.pk is None:
        return
    old = Upstream.objects.filter(pk=instance.pk).values_list("name", flat=True).first()
    instance.__dict__[_OLD_NAME] = old


@receiver(post_save, sender=Upstream, dispatch_uid="mcp_upstream_renamed")
def _upstream_renamed(sender: type[Upstream], instance: Upstream, **kwargs: Any) -> None:
    old = instance.__dict__.pop(_OLD_NAME, None)
    if old is not None and old != instance.name:
        upstream_renamed(instance, old)


@receiver(pre_create_historical_record, dispatch_uid="mcp_history_source")
def _history_row_stamped(sender: type, history_instance: Any, **kwargs: Any) -> None:
    # Saves from the admin, the API, an import or an upstream sync all reach the history
    # through the same library signal; the interface said which one it is.
    history.stamp_history_row(history_instance)


# -- rate limits ------------------------------------------------------------------------------


@receiver(post_save, sender=RateLimit, dispatch_uid="mcp_rate_limit_saved")
@receiver(post_delete, sender=RateLimit, dispatch_uid="mcp_rate_limit_deleted")
def _rate_limit_changed(sender: type, instance: RateLimit, **kwargs: Any) -> None:
    # Every process re-reads the endpoint's limits (services/limits.py), whoever edited them.
    limits_changed(endpoint_id=instance.endpoint_id)
