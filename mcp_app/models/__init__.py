"""Catalog, credential, session and call-log models: import them from here (``mcp_app.models``)."""

from mcp_app.models.api_token import ApiToken
from mcp_app.models.background_call import BackgroundCall
from mcp_app.models.call_log import CallLog
from mcp_app.models.call_log_rollup import CallLogRollup, CallLogRollupMark
from mcp_app.models.connection import UpstreamConnection
from mcp_app.models.credential import Credential
from mcp_app.models.draft import Draft
from mcp_app.models.endpoint import Endpoint
from mcp_app.models.icon import IconImage
from mcp_app.models.limits import RateLimit
from mcp_app.models.membership import MembershipChange
from mcp_app.models.policy import Policy
from mcp_app.models.prompt import Prompt, PromptArgument, PromptMessage
from mcp_app.models.replay import ReplayRun
from mcp_app.models.resource import Resource, ResourceTemplate
from mcp_app.models.session import Session
from mcp_app.models.tool import Tool
from mcp_app.models.upstream import Upstream

__all__ = [
    "ApiToken",
    "BackgroundCall",
    "CallLog",
    "CallLogRollup",
    "CallLogRollupMark",
    "Credential",
    "Draft",
    "Endpoint",
    "IconImage",
    "MembershipChange",
    "Policy",
    "Prompt",
    "PromptArgument",
    "PromptMessage",
    "RateLimit",
    "ReplayRun",
    "Resource",
    "ResourceTemplate",
    "Session",
    "Tool",
    "Upstream",
    "UpstreamConnection",
]
