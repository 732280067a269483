"""The signed-in user's Connections page: their own accounts at per-user OAuth upstreams.

Any signed-in user (not only staff) lists the upstreams that authorize each user, connects
(``services.connections.connection_start``, then the authorization server's callback) and
disconnects (``connection_revoke``). The views parse, call the services and render; a failed
step renders the page with what went wrong and changes nothing.
"""

from __future__ import annotations

from asgiref.sync import async_to_sync
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from mcp_app.models import Upstream, UpstreamConnection
from mcp_app.services.connections import (
    ConnectError,
    connection_finish,
    connection_revoke,
    connection_start,
    pending_add,
    pending_take,
    upstreams_for_connections,
)


def _user_id(request: HttpRequest) -> int:
    user_id = request.user.pk
    assert isinstance(user_id, int)  # login_required: a signed-in user
    return user_id


def _page(request: HttpRequest, *, error: str = "", status: int = 200) -> HttpResponse:
    connections = {
        connection.upstream_id: connection
        for connection in UpstreamConnection.objects.filter(user_id=_user_id(request))
    }
    rows = [
        {"upstream": upstream, "connection": connections.get(upstream.pk)}
        for upstream in upstreams_for_connections()
    ]
    context = {"rows": rows, "error": error, "nav": "connections"}
    return render(request, "mcp_app/connections.html", context, status=status)


@login_required
@require_GET
def connections(request: HttpRequest) -> HttpResponse:
    return _page(request)


@login_required
@require_POST
def connect(request: HttpRequest, pk: int) -> HttpResponse:
    upstream = get_object_or_404(Upstream, pk=pk, auth_mode=Upstream.AuthMode.USER_OAUTH)
    try:
        started = async_to_sync(connection_start)(upstream=upstream)
    except ConnectError as exc:
        return _page(request, error=f"Could not connect to {upstream.name}: {exc}", status=502)
    pending_add(request.session, started)
    return HttpResponseRedirect(started.url)


@login_required
@require_GET
def callback(request: HttpRequest) -> HttpResponse:
    """Where the authorization server sends the user back (``code`` and ``state``, or
    ``error``)."""
    pending = pending_take(request.session, request.GET.get("state", ""))
    if pending is None:
        return _page(
            request,
            error=(
                "This answer from an authorization server matches no connection you started "
                "in this browser (or it is too old): nothing was connected. Start again."
            ),
            status=400,
        )
    query = {key: request.GET.get(key, "") for key in ("code", "error", "iss")}
    if "iss" not in request.GET:
        del query["iss"]
    try:
        upstream = async_to_sync(connection_finish)(
            user_id=_user_id(request), pending=pending, query=query
        )
    except ConnectError as exc:
        return _page(request, error=f"Not connected: {exc}", status=400)
    messages.success(request, f"Your account at {upstream.name} is connected.")
    return HttpResponseRedirect(reverse("mcp_app:connections"))


@login_required
@require_POST
def disconnect(request: HttpRequest, pk: int) -> HttpResponse:
    connection = get_object_or_404(UpstreamConnection, upstream_id=pk, user_id=_user_id(request))
    name = connection.upstream.name
    if connection_revoke(connection):
        messages.success(request, f"Disconnected from {name}; its tokens were revoked.")
    else:
        messages.success(
            request,
            f"Disconnected from {name}. Its authorization server was not told (it offers no "
            "revocation, or did not answer): its tokens end when they expire.",
        )
    return HttpResponseRedirect(reverse("mcp_app:connections"))
