"""``manage.py seed_demo``: create the "demo" endpoint with a few tools, resources and a prompt.

Idempotent: rows that already exist (matched by slug, tool name on the endpoint, URI, URI
template or prompt name) are left as they are, so operator edits survive a re-run.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand
from django.db import transaction

from mcp_app.models import Endpoint, Prompt, Resource, ResourceTemplate, Tool
from mcp_app.services.catalog_writes import (
    catalog_row_attach,
    endpoint_create,
    prompt_create,
    resource_create,
    resource_template_create,
    tool_create,
)

SLUG = "demo"
# The same tools behind OAuth: sign in as the admin user to try a client's authorization flow.
OAUTH_SLUG = "demo-oauth"
OAUTH_TOOLS = ("echo", "add", "current_time", "countdown")
PYTHON_TOOLS = ("echo", "add", "current_time", "sleep_with_progress")
README = """# Demo endpoint

This endpoint is created by `manage.py seed_demo`. It publishes:

- python tools: echo, add, current_time, sleep_with_progress
- countdown, a background tool: it runs on a worker and reports progress every second
- a template tool: greet
- this resource, and the template demo://notes/{topic}
- the prompt code_review
"""


class Command(BaseCommand):
    help = (
        "Create (or complete) the demo endpoint with sample tools, resources and a prompt, and "
        "the same tools on an OAuth-protected endpoint."
    )

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        endpoint = Endpoint.objects.filter(slug=SLUG).first()
        if endpoint is None:
            endpoint = endpoint_create(
                slug=SLUG,
                title="Demo",
                description="Sample tools, resources and prompts to try any MCP client.",
                instructions=(
                    "Use echo, add and current_time for quick checks; sleep_with_progress "
                    "reports progress; countdown runs in the background on a worker; greet "
                    "renders a template. Read demo://readme first."
                ),
                # For trying clients locally without signing in (docs/auth.md, "Auth modes").
                auth_mode=Endpoint.AuthMode.PUBLIC,
            )
            self._created("endpoint", endpoint.slug)
        else:
            self._exists("endpoint", endpoint.slug)

        existing_tools = set(endpoint.tools.values_list("name", flat=True))
        for function in PYTHON_TOOLS:
            if function in existing_tools:
                self._exists("tool", function)
                continue
            tool_create(
                name=function, kind=Tool.Kind.PYTHON, config={"function": function},
                endpoints=[endpoint],
            )  # fmt: skip
            self._created("tool", function)
        if "countdown" in existing_tools:
            self._exists("tool", "countdown")
        else:
            tool_create(
                name="countdown", kind=Tool.Kind.PYTHON, config={"function": "countdown"},
                execution_mode=Tool.Execution.BACKGROUND, endpoints=[endpoint],
            )  # fmt: skip
            self._created("tool", "countdown")
        if "greet" in existing_tools:
            self._exists("tool", "greet")
        else:
            tool_create(
                name="greet",
                title="Greet",
                description="Greet someone by name.",
                kind=Tool.Kind.TEMPLATE,
                config={"template": "Hello {{ name }}!", "output": "text"},
                input_schema={
                    "type": "object",
                    "properties": {"name": {"type": "string", "description": "Who to greet."}},
                    "required": ["name"],
                    "additionalProperties": False,
                },
                read_only_hint=True,
                open_world_hint=False,
                endpoints=[endpoint],
            )
            self._created("tool", "greet")

        self._ensure_resource(endpoint)
        self._ensure_template(endpoint)
        self._ensure_prompt(endpoint)
        protected = self._ensure_oauth_endpoint(endpoint)
        self.stdout.write(f"Demo endpoint URL: {endpoint.public_url()}")
        self.stdout.write(f"OAuth demo endpoint URL: {protected.public_url()}")

    def _ensure_oauth_endpoint(self, demo: Endpoint) -> Endpoint:
        """The demo's tools on an OAuth-protected endpoint (the model's default auth mode)."""
        endpoint = Endpoint.objects.filter(slug=OAUTH_SLUG).first()
        if endpoint is not None:
            self._exists("endpoint", OAUTH_SLUG)
            return endpoint
        endpoint = endpoint_create(
            slug=OAUTH_SLUG,
            title="Demo (OAuth)",
            description="The demo tools behind OAuth: clients sign a user in first.",
            instructions="Use echo, add and current_time for quick checks; countdown is long.",
        )
        for tool in demo.tools.filter(name__in=OAUTH_TOOLS):
            catalog_row_attach(tool, endpoint_ids=[endpoint.pk], actor=None, source=None)
        self._created("endpoint", OAUTH_SLUG)
        return endpoint

    def _ensure_resource(self, endpoint: Endpoint) -> None:
        uri = "demo://readme"
        if resource := Resource.objects.filter(uri=uri).first():
            catalog_row_attach(resource, endpoint_ids=[endpoint.pk], actor=None, source=None)
            self._exists("resource", uri)
            return
        resource_create(
            uri=uri, name="readme", title="Demo README", description="What this endpoint offers.",
            mime_type="text/markdown", text=README, endpoints=[endpoint],
        )  # fmt: skip
        self._created("resource", uri)

    def _ensure_template(self, endpoint: Endpoint) -> None:
        uri_template = "demo://notes/{topic}"
        if template := ResourceTemplate.objects.filter(uri_template=uri_template).first():
            catalog_row_attach(template, endpoint_ids=[endpoint.pk], actor=None, source=None)
            self._exists("resource template", uri_template)
            return
        resource_template_create(
            uri_template=uri_template,
            name="notes",
            title="Notes by topic",
            description="A short note about the given topic.",
            mime_type="text/markdown",
            kind=ResourceTemplate.Kind.TEMPLATE,
            config={"template": "# Notes on {{ topic }}\n\nNothing written about {{ topic }} yet."},
            completions={"topic": ["mcp", "django", "channels", "celery"]},
            endpoints=[endpoint],
        )
        self._created("resource template", uri_template)

    def _ensure_prompt(self, endpoint: Endpoint) -> None:
        name = "code_review"
        if prompt := Prompt.objects.filter(name=name).first():
            catalog_row_attach(prompt, endpoint_ids=[endpoint.pk], actor=None, source=None)
            self._exists("prompt", name)
            return
        prompt_create(
            name=name,
            title="Code review",
            description="Ask for a review of a piece of code.",
            arguments=[
                {"name": "code", "description": "The code to review.", "required": True},
                {
                    "name": "language",
                    "description": "Programming language of the code.",
                    "completion_values": "python\njavascript\ntypescript\ngo\nrust",
                },
            ],
            messages=[
                {
                    "role": "user",
                    "kind": "text",
                    "text": "Please review this {language} code:\n\n{code}",
                },
                {
                    "role": "assistant",
                    "kind": "text",
                    "text": "I will check correctness, readability and edge cases.",
                },
            ],
            endpoints=[endpoint],
        )
        self._created("prompt", name)

    def _created(self, what: str, name: str) -> None:
        self.stdout.write(self.style.SUCCESS(f"Created {what} {name}"))

    def _exists(self, what: str, name: str) -> None:
        self.stdout.write(f"Kept existing {what} {name}")
