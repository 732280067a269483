"""The catalog the conformance scenarios expect, created through the ordinary services.

``load(slug)`` (re)creates endpoint ``slug`` with every tool, resource, template and prompt the
official suite calls, by the names and with the behaviours its scenario descriptions give.
Rows of an earlier load are replaced, so loading twice gives the same catalog.
"""

from __future__ import annotations

from typing import Any

from django.core.files.base import ContentFile
from django.db import transaction

from conformance.media import PNG
from mcp_app.executors.python import tool_functions
from mcp_app.models import Endpoint, Prompt, Resource, ResourceTemplate, Tool
from mcp_app.services.catalog_writes import (
    endpoint_create,
    prompt_create,
    resource_create,
    resource_template_create,
    tool_create,
)

TOOLS_MODULE = "conformance.tools"
NO_ARGUMENTS = {"type": "object", "properties": {}, "additionalProperties": False}

# Tool name -> the conformance.tools function behind it.
PYTHON_TOOLS = {
    "test_image_content": "conformance_image",
    "test_audio_content": "conformance_audio",
    "test_embedded_resource": "conformance_embedded_resource",
    "test_multiple_content_types": "conformance_mixed_content",
    "test_tool_with_logging": "conformance_logging",
    "test_tool_with_progress": "conformance_progress",
    "test_error_handling": "conformance_error",
    "test_sampling": "conformance_sampling",
    "test_elicitation": "conformance_elicitation",
    "test_elicitation_sep1034_defaults": "conformance_elicitation_defaults",
    "test_elicitation_sep1330_enums": "conformance_elicitation_enums",
    "test_reconnection": "conformance_slow",
    # 2026-07-28: asking by retry (input_required), capabilities, change notifications.
    "test_input_required_result_elicitation": "conformance_ask_name",
    "test_input_required_result_sampling": "conformance_ask_model",
    "test_input_required_result_list_roots": "conformance_ask_roots",
    "test_input_required_result_request_state": "conformance_ask_state",
    "test_input_required_result_multiple_inputs": "conformance_ask_everything",
    "test_input_required_result_multi_round": "conformance_ask_twice",
    "test_input_required_result_tampered_state": "conformance_ask_state",
    "test_input_required_result_capabilities": "conformance_ask_what_the_client_can",
    "test_missing_capability": "conformance_needs_sampling",
    "test_streaming_elicitation": "conformance_ask_name",
    "test_logging_tool": "conformance_logging",
    "test_trigger_tool_change": "conformance_change_tools",
    "test_trigger_prompt_change": "conformance_change_prompts",
}
# MCP tasks (the tasks-* scenarios): tool name -> (function, execution mode, task support).
# Background tools become tasks whenever the request allows one; the auto tool asks first
# and then continues as a task (ToolCallContext.continue_as_task).
TASK_TOOLS = {
    "slow_compute": ("conformance_slow_compute", Tool.Execution.BACKGROUND, "optional"),
    "failing_job": ("conformance_failing_job", Tool.Execution.BACKGROUND, "required"),
    "protocol_error_job": ("conformance_protocol_error_job", Tool.Execution.BACKGROUND, "optional"),
    "confirm_delete": ("conformance_confirm_delete", Tool.Execution.BACKGROUND, "optional"),
    "multi_input": ("conformance_multi_input", Tool.Execution.BACKGROUND, "optional"),
    "test_tool_with_task": ("conformance_greet_then_task", Tool.Execution.AUTO, "required"),
}
# Every 2020-12 keyword family the suites look for, to be kept verbatim (SEP-2106).
JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


class NotConfigured(Exception):
    """The server does not offer ``conformance.tools``: the python fixtures cannot be made."""


def _template_tool(name: str, description: str, text: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "kind": Tool.Kind.TEMPLATE,
        "config": {"template": text, "output": "text"},
        "description": description,
        "input_schema": fields.pop("input_schema", NO_ARGUMENTS),
        **fields,
    }


def _tools() -> list[dict[str, Any]]:
    tools = [
        _template_tool(
            "test_simple_text",
            "Returns a fixed text.",
            "This is a simple text response for testing.",
        ),
        _template_tool(
            "json_schema_2020_12_tool",
            "Takes a JSON Schema 2020-12 input with $defs and a $ref.",
            "Received {{ name }}.",
            input_schema=JSON_SCHEMA_2020_12,
        ),
        _template_tool(
            "test_x_mcp_header",
            "Echoes a region that clients also send as the Mcp-Param-Region header.",
            "Region: {{ region }}",
            input_schema={
                "type": "object",
                "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
                "required": ["region"],
            },
        ),
    ]
    tools += [
        {"name": name, "kind": Tool.Kind.PYTHON, "config": {"function": function}}
        for name, function in PYTHON_TOOLS.items()
    ]
    tools.append(
        _template_tool(
            "greet",
            "Greets someone by name.",
            "Hello, {{ name }}!",
            input_schema={
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            },
        )
    )
    tools += [
        {
            "name": name,
            "kind": Tool.Kind.PYTHON,
            "config": {"function": function},
            "execution_mode": execution,
            "task_support": task_support,
        }
        for name, (function, execution, task_support) in TASK_TOOLS.items()
    ]
    return tools


def _clear(slug: str) -> None:
    endpoint = Endpoint.objects.filter(slug=slug).first()
    if endpoint is None:
        return
    Tool.objects.filter(endpoints=endpoint).delete()
    Resource.objects.filter(endpoints=endpoint).delete()
    ResourceTemplate.objects.filter(endpoints=endpoint).delete()
    Prompt.objects.filter(endpoints=endpoint).delete()
    endpoint.delete()


@transaction.atomic
def load(slug: str = "conformance") -> Endpoint:
    """Create endpoint ``slug`` with every fixture; return it.

    Raises:
        NotConfigured: ``conformance.tools`` is not in ``MCP_PYTHON_TOOL_MODULES``.
    """
    functions = {*PYTHON_TOOLS.values(), *(function for function, _, _ in TASK_TOOLS.values())}
    missing = sorted(functions - set(tool_functions()))
    if missing:
        raise NotConfigured(
            f"Add {TOOLS_MODULE} to MCP_PYTHON_TOOL_MODULES (missing: {', '.join(missing)})."
        )
    _clear(slug)
    endpoint = endpoint_create(
        slug=slug,
        title="MCP conformance fixtures",
        instructions="Fixtures for the official MCP conformance suite.",
        # The conformance suite tests the protocol, not authorization: no token is sent.
        auth_mode=Endpoint.AuthMode.PUBLIC,
    )
    for values in _tools():
        tool_create(endpoints=[endpoint], **values)

    resource_create(
        uri="test://static-text",
        name="static-text",
        mime_type="text/plain",
        text="This is the content of the static text resource.",
        endpoints=[endpoint],
    )
    resource_create(
        uri="test://static-binary",
        name="static-binary",
        mime_type="image/png",
        file=ContentFile(PNG, name="conformance-static-binary.png"),
        endpoints=[endpoint],
    )
    resource_create(
        uri="test://watched-resource",
        name="watched-resource",
        mime_type="text/plain",
        text="Watched resource content.",
        endpoints=[endpoint],
    )
    resource_template_create(
        uri_template="test://template/{id}/data",
        name="template-data",
        mime_type="application/json",
        kind=ResourceTemplate.Kind.TEMPLATE,
        config={"template": '{"id":"{{ id }}","templateTest":true,"data":"Data for ID: {{ id }}"}'},
        endpoints=[endpoint],
    )

    prompt_create(
        name="test_simple_prompt",
        description="A prompt without arguments.",
        messages=[{"role": "user", "text": "This is a simple prompt for testing."}],
        endpoints=[endpoint],
    )
    prompt_create(
        name="test_prompt_with_arguments",
        description="A prompt with two required arguments.",
        arguments=[
            {"name": "arg1", "description": "First test argument", "required": True},
            {"name": "arg2", "description": "Second test argument", "required": True},
        ],
        messages=[{"role": "user", "text": "Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"}],
        endpoints=[endpoint],
    )
    prompt_create(
        name="test_prompt_with_embedded_resource",
        description="A prompt that embeds the resource it is given.",
        arguments=[{"name": "resourceUri", "description": "URI of the resource", "required": True}],
        messages=[
            {
                "role": "user",
                "kind": "resource",
                "uri": "{resourceUri}",
                "mime_type": "text/plain",
                "text": "Embedded resource content for testing.",
            },
            {"role": "user", "text": "Please process the embedded resource above."},
        ],
        endpoints=[endpoint],
    )
    prompt_create(
        name="test_input_required_result_prompt",
        description="A prompt whose missing context is asked from the user (2026-07-28).",
        arguments=[{"name": "context", "description": "What to focus on", "required": True}],
        messages=[{"role": "user", "text": "Prompt with context: {context}"}],
        endpoints=[endpoint],
    )
    prompt_create(
        name="test_prompt_with_image",
        description="A prompt with an image.",
        messages=[
            {
                "role": "user",
                "kind": "image",
                "mime_type": "image/png",
                "file": ContentFile(PNG, name="conformance-prompt.png"),
            },
            {"role": "user", "text": "Please analyze the image above."},
        ],
        endpoints=[endpoint],
    )
    return endpoint
