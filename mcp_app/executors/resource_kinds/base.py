"""The Resolver interface every resource-template kind implements, what it reads of a template
(``TemplateSource``) and of the request (``ReadContext``), and the contents it returns.

A resolver owns its kind end to end, as an executor owns a tool kind: it checks a template's
plain ``config`` (``validate_config``), supplies the admin form's fields for it
(``config_form``, ``form_initial``, ``config_from_form``), and turns a URI the template matched
into ``resources/read`` contents (``resolve``). It reads no rows: what it needs from outside (an
upstream's resource) it asks of the ``ReadContext`` the services hand it.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from django import forms

# MIME types served as text (when the bytes decode as UTF-8) although not text/*.
_TEXTUAL_TYPES = frozenset(
    {
        "application/json", "application/xml", "application/javascript", "application/yaml",
        "application/x-yaml", "application/toml", "application/sql", "image/svg+xml",
    }
)  # fmt: skip
DEFAULT_TEMPLATE_MIME = "text/plain"

Contents = Sequence[Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class TemplateSource:
    """What a resolver reads of a resource template: plain values from the catalog snapshot."""

    kind: str
    uri_template: str
    mime_type: str = ""
    config: Mapping[str, Any] = field(default_factory=dict)
    # The upstream MCP server the template names (a kind that ``reads_upstream``), and the
    # template to fill in there.
    upstream: str | None = None
    remote_uri_template: str = ""


class ReadContext(Protocol):
    """What the services do for a resolver during one ``resources/read``: the reads it may not
    do itself, in the session of the request's caller."""

    async def read_upstream(self, upstream: str, remote_uri: str, uri: str) -> Contents:
        """Read ``remote_uri`` on the upstream named ``upstream``; the contents carry ``uri``.

        Raises:
            McpError: the upstream is unknown, unreachable or answered with an error.
        """
        ...


class Resolver:
    """One resource-template kind. Subclasses set ``kind`` and ``label``, and implement
    ``validate_config`` and ``resolve``; a kind with config fields sets ``config_form`` and
    implements ``form_initial`` and ``config_from_form``."""

    kind: ClassVar[str] = ""
    label: ClassVar[str] = ""
    # The admin fields of this kind's config; their names must be unique across kinds.
    config_form: ClassVar[type[forms.Form] | None] = None
    # Whether a template of this kind names an upstream MCP server (its ``upstream`` column),
    # which no template of another kind may.
    reads_upstream: ClassVar[bool] = False

    def validate_config(self, config: Mapping[str, Any]) -> None:
        """Check a template's ``config``.

        Raises:
            ConfigError: the config cannot resolve URIs; the message says why.
        """
        raise NotImplementedError("subclasses of Resolver must provide validate_config()")

    async def resolve(
        self,
        template: TemplateSource,
        uri: str,
        variables: Mapping[str, str],
        context: ReadContext,
    ) -> Contents | None:
        """Return the contents of ``uri``, which ``template`` matched with ``variables``; None
        when the template has nothing there (the client gets "resource not found").

        Raises:
            ConfigError: the config no longer resolves (a function no longer registered).
            ToolError: the resolver failed; the message is safe to show the client.
        """
        raise NotImplementedError("subclasses of Resolver must provide resolve()")

    def form_initial(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """Return the initial values of ``config_form``'s fields for a saved ``config``."""
        return {}

    def config_from_form(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """Build the plain config from ``config_form``'s cleaned data (no form: no config).

        Raises:
            ConfigFormError: the fields do not make a usable config, by field name.
        """
        return {}


def text_contents(uri: str, mime_type: str, text: str) -> dict[str, Any]:
    """One text content of ``resources/read``."""
    contents: dict[str, Any] = {"uri": uri, "text": text}
    if mime_type:
        contents["mimeType"] = mime_type
    return contents


def bytes_contents(uri: str, mime_type: str, data: bytes) -> dict[str, Any]:
    """One content of ``resources/read`` for ``data``: textual types as ``text`` when they
    decode as UTF-8, anything else as a base64 blob."""
    if (
        mime_type.startswith("text/")
        or mime_type in _TEXTUAL_TYPES
        or mime_type.endswith(("+json", "+xml"))
    ):
        try:
            return text_contents(uri, mime_type, data.decode("utf-8"))
        except UnicodeDecodeError:
            pass
    contents: dict[str, Any] = {"uri": uri, "blob": base64.b64encode(data).decode("ascii")}
    if mime_type:
        contents["mimeType"] = mime_type
    return contents
