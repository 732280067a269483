"""Two teams and their rows, for the tests that prove one team cannot reach the other's.

``two_teams()`` makes groups "alpha" and "beta", a member of each holding every catalog,
limit, policy and call-log permission but not ``manage_every_team``, a grandfathered
operator who holds it, a superuser, and in each team an endpoint publishing a tool, a
resource, a resource template and a prompt, with a credential, an upstream, a rate limit
and a policy; and one site-wide endpoint with a tool. Rows are named after their team
("alpha-tool", "beta-credential") so a page or a body naming one is easy to check.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.auth.models import Group, Permission, User
from django.db.models import Model

from mcp_app.models import (
    Credential,
    Endpoint,
    Policy,
    Prompt,
    RateLimit,
    Resource,
    ResourceTemplate,
    Tool,
    Upstream,
)
from mcp_app.services.catalog_writes import (
    endpoint_create,
    prompt_create,
    resource_create,
    resource_template_create,
    tool_create,
)
from mcp_app.services.credentials import credential_set_secret
from mcp_app.services.policies.writes import policy_save
from mcp_app.services.row_writes import setting_row_save

# Every permission a team member holds: all of mcp_app's but the one that lifts teams.
EVERY_TEAM = "manage_every_team"


@dataclass
class TeamRows:
    group: Group
    member: User
    endpoint: Endpoint
    tool: Tool
    resource: Resource
    template: ResourceTemplate
    prompt: Prompt
    credential: Credential
    upstream: Upstream
    rate_limit: RateLimit
    policy: Policy

    def rows(self) -> list[Model]:
        """Every row of the team, each kind once."""
        return [
            self.endpoint,
            self.tool,
            self.resource,
            self.template,
            self.prompt,
            self.credential,
            self.upstream,
            self.rate_limit,
            self.policy,
        ]


@dataclass
class World:
    alpha: TeamRows
    beta: TeamRows
    superuser: User
    operator: User  # holds manage_every_team: an operator from before teams
    site_endpoint: Endpoint
    site_tool: Tool
    extra: dict[str, Model] = field(default_factory=dict)


def member_permissions() -> list[Permission]:
    return list(
        Permission.objects.filter(content_type__app_label="mcp_app").exclude(codename=EVERY_TEAM)
    )


def make_member(username: str, *groups: Group, staff: bool = True) -> User:
    """A staff user in ``groups`` holding every mcp_app permission but ``manage_every_team``."""
    user = User.objects.create_user(
        username=username, password="unused-password-123", is_staff=staff
    )
    user.user_permissions.set(member_permissions())
    user.groups.set(groups)
    return user


def _team(name: str) -> TeamRows:
    group = Group.objects.create(name=name)
    member = make_member(f"{name}-member", group)
    endpoint = endpoint_create(slug=f"{name}-endpoint", team=group, auth_mode="public")
    credential = Credential(name=f"{name}-credential", kind=Credential.Kind.BEARER, team=group)
    credential_set_secret(credential=credential, secret=f"{name}-secret-value")
    setting_row_save(credential, actor=None, source=None)
    upstream = Upstream(name=f"{name}-upstream", url="https://upstream.example/mcp", team=group)
    setting_row_save(upstream, actor=None, source=None)
    tool = tool_create(
        name=f"{name}-tool",
        kind="python",
        config={"function": "current_time"},
        description=f"The {name} team's tool.",
        team=group,
        endpoints=[endpoint],
    )
    resource = resource_create(
        uri=f"demo://{name}/readme",
        name=f"{name}-resource",
        text="hello",
        team=group,
        endpoints=[endpoint],
    )
    template = resource_template_create(
        uri_template=f"demo://{name}/{{item}}",
        name=f"{name}-template",
        kind="template",
        config={"template": "item {{ item }}"},
        team=group,
        endpoints=[endpoint],
    )
    prompt = prompt_create(
        name=f"{name}-prompt",
        description="A prompt.",
        messages=[{"role": "user", "kind": "text", "text": "hi"}],
        team=group,
        endpoints=[endpoint],
    )
    rate_limit = RateLimit(endpoint=endpoint, rate=10, description=f"{name}-limit")
    setting_row_save(rate_limit, actor=None, source=None)
    policy = Policy(endpoint=endpoint, name=f"{name}-policy", kind="mask", config={})
    policy_save(policy, actor=None, source=None)
    return TeamRows(
        group=group,
        member=member,
        endpoint=endpoint,
        tool=tool,
        resource=resource,
        template=template,
        prompt=prompt,
        credential=credential,
        upstream=upstream,
        rate_limit=rate_limit,
        policy=policy,
    )


def two_teams() -> World:
    """Make the two teams, their members and rows, a superuser, an operator and a site row."""
    alpha, beta = _team("alpha"), _team("beta")
    superuser = User.objects.create_superuser("root", "root@example.com", "unused-password-123")
    operator = make_member("operator")
    operator.user_permissions.add(Permission.objects.get(codename=EVERY_TEAM))
    site_endpoint = endpoint_create(slug="site-endpoint", auth_mode="public")
    site_tool = tool_create(
        name="site-tool",
        kind="python",
        config={"function": "current_time"},
        description="A site-wide tool.",
        endpoints=[site_endpoint],
    )
    return World(
        alpha=alpha,
        beta=beta,
        superuser=superuser,
        operator=operator,
        site_endpoint=site_endpoint,
        site_tool=site_tool,
    )
