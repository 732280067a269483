"""Protocol revisions, eras and per-revision features: the only place that compares versions.

Revisions 2024-11-05 .. 2025-11-25 form the *legacy* (handshake) era: the version is chosen once
by ``initialize`` and scoped to a session. 2026-07-28 is the *modern* era: every request names
its version in ``params._meta`` and no session exists (2026-07-28 basic/versioning,
"Backward Compatibility with Initialization-Based Versions").

Other modules ask ``supports(version, Feature.X)`` instead of comparing date strings.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Final

LEGACY_VERSIONS: Final[tuple[str, ...]] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS: Final[tuple[str, ...]] = ("2026-07-28",)
ALL_VERSIONS: Final[tuple[str, ...]] = (*LEGACY_VERSIONS, *MODERN_VERSIONS)
LATEST_LEGACY: Final[str] = LEGACY_VERSIONS[-1]
LATEST_MODERN: Final[str] = MODERN_VERSIONS[-1]
# What an UnsupportedProtocolVersion error offers: the versions usable with the per-request
# envelope, the same list server/discover gives (2026-07-28 basic/versioning). Handshake
# revisions are reached through initialize, so a client that speaks only those falls back to
# it (any modern error it does not recognise makes a dual-era client try initialize).
SUPPORTED_FOR_ERRORS: Final[tuple[str, ...]] = tuple(reversed(MODERN_VERSIONS))
# The version a legacy request without MCP-Protocol-Version is assumed to speak
# (2025-06-18 basic/transports, "Protocol Version Header").
HEADERLESS_DEFAULT: Final[str] = "2025-03-26"


class Era(enum.Enum):
    LEGACY = "legacy"
    MODERN = "modern"

    # Members are singletons: identity hashing is as correct as Enum's hash of the name, and
    # runs in C (eras and features key dictionaries on every request).
    __hash__ = object.__hash__


class Feature(enum.Enum):
    """Capabilities of the wire format that appeared (or went away) in some revision."""

    BATCHES = "batches"  # 2025-03-26 only
    TOOL_ANNOTATIONS = "tool_annotations"  # 2025-03-26+
    AUDIO_CONTENT = "audio_content"  # 2025-03-26+
    PROGRESS_MESSAGE = "progress_message"  # 2025-03-26+
    COMPLETIONS_CAPABILITY = "completions_capability"  # 2025-03-26+
    TITLES = "titles"  # title and _meta on definitions, 2025-06-18+
    STRUCTURED_OUTPUT = "structured_output"  # outputSchema/structuredContent, 2025-06-18+
    RESOURCE_LINK = "resource_link"  # 2025-06-18+
    ELICITATION = "elicitation"  # 2025-06-18+
    COMPLETION_CONTEXT = "completion_context"  # 2025-06-18+
    PROTOCOL_VERSION_HEADER = "protocol_version_header"  # 2025-06-18+
    ICONS = "icons"  # 2025-11-25+
    ELICITATION_URL = "elicitation_url"  # 2025-11-25+
    SSE_PRIMING = "sse_priming"  # 2025-11-25 (legacy streams only)
    TASKS_CORE = "tasks_core"  # 2025-11-25 only (experimental core tasks)
    SESSIONS = "sessions"  # legacy era
    PING = "ping"  # legacy era
    LOGGING_SET_LEVEL = "logging_set_level"  # legacy era
    RESOURCE_SUBSCRIBE_RPC = "resource_subscribe_rpc"  # legacy era
    RESULT_TYPE = "result_type"  # modern
    CACHEABLE_RESULTS = "cacheable_results"  # modern: ttlMs/cacheScope
    ANY_JSON_STRUCTURED = "any_json_structured"  # modern: non-object outputSchema/structuredContent
    RESOURCE_NOT_FOUND_AS_INVALID_PARAMS = "resource_not_found_as_invalid_params"  # modern
    SERVER_DISCOVER = "server_discover"  # modern
    INPUT_REQUIRED = "input_required"  # modern: multi-round-trip requests (MRTR)
    TASKS_EXTENSION = "tasks_extension"  # modern: the io.modelcontextprotocol/tasks extension

    __hash__ = object.__hash__  # as Era's


_SINCE: Final[Mapping[Feature, str]] = {
    Feature.TOOL_ANNOTATIONS: "2025-03-26",
    Feature.AUDIO_CONTENT: "2025-03-26",
    Feature.PROGRESS_MESSAGE: "2025-03-26",
    Feature.COMPLETIONS_CAPABILITY: "2025-03-26",
    Feature.TITLES: "2025-06-18",
    Feature.STRUCTURED_OUTPUT: "2025-06-18",
    Feature.RESOURCE_LINK: "2025-06-18",
    Feature.ELICITATION: "2025-06-18",
    Feature.COMPLETION_CONTEXT: "2025-06-18",
    Feature.PROTOCOL_VERSION_HEADER: "2025-06-18",
    Feature.ICONS: "2025-11-25",
    Feature.ELICITATION_URL: "2025-11-25",
}
_ONLY: Final[Mapping[Feature, frozenset[str]]] = {
    Feature.BATCHES: frozenset({"2025-03-26"}),
    Feature.SSE_PRIMING: frozenset({"2025-11-25"}),
    Feature.TASKS_CORE: frozenset({"2025-11-25"}),
    Feature.SESSIONS: frozenset(LEGACY_VERSIONS),
    Feature.PING: frozenset(LEGACY_VERSIONS),
    Feature.LOGGING_SET_LEVEL: frozenset(LEGACY_VERSIONS),
    Feature.RESOURCE_SUBSCRIBE_RPC: frozenset(LEGACY_VERSIONS),
    Feature.RESULT_TYPE: frozenset(MODERN_VERSIONS),
    Feature.CACHEABLE_RESULTS: frozenset(MODERN_VERSIONS),
    Feature.ANY_JSON_STRUCTURED: frozenset(MODERN_VERSIONS),
    Feature.RESOURCE_NOT_FOUND_AS_INVALID_PARAMS: frozenset(MODERN_VERSIONS),
    Feature.SERVER_DISCOVER: frozenset(MODERN_VERSIONS),
    Feature.INPUT_REQUIRED: frozenset(MODERN_VERSIONS),
    Feature.TASKS_EXTENSION: frozenset(MODERN_VERSIONS),
}


def era_of(version: str) -> Era:
    """Return the era of a served version. Raises ``ValueError`` for one we do not serve."""
    if version in MODERN_VERSIONS:
        return Era.MODERN
    if version in LEGACY_VERSIONS:
        return Era.LEGACY
    raise ValueError(f"unsupported protocol version {version!r}")


def at_least(version: str, minimum: str) -> bool:
    """Order by position in ALL_VERSIONS, never by string comparison."""
    return ALL_VERSIONS.index(version) >= ALL_VERSIONS.index(minimum)


def _supports(version: str, feature: Feature) -> bool:
    if feature in _ONLY:
        return version in _ONLY[feature]
    return at_least(version, _SINCE[feature])


# Every answer for the versions served, worked out once: it is asked several times a request.
_SUPPORTS: Final[Mapping[tuple[str, Feature], bool]] = {
    (version, feature): _supports(version, feature)
    for version in ALL_VERSIONS
    for feature in Feature
}


def supports(version: str, feature: Feature) -> bool:
    found = _SUPPORTS.get((version, feature))
    return _supports(version, feature) if found is None else found


def negotiate_initialize(requested: object) -> str:
    """Answer an ``initialize`` offer: echo a handshake version we serve, else counter-offer.

    Unknown versions are not an error in the handshake, and a request for a modern version
    must get a handshake version back (2025-11-25 basic/lifecycle, "Version Negotiation").
    """
    if isinstance(requested, str) and requested in LEGACY_VERSIONS:
        return requested
    return LATEST_LEGACY
