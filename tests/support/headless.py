"""A user at a browser, without the browser: sign in and answer the consent page over HTTP.

Depends on httpx and the standard library only, so the python SDK 1.x driver
(tests/auth/sdk1_client.py, run in its own virtual environment) uses it too. The client
passed in must not follow redirects and keeps the cookie jar (session, CSRF) of the "browser".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx


@dataclass
class _Form:
    attrs: dict[str, str]
    inputs: list[dict[str, str]] = field(default_factory=list)


class _Forms(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.forms: list[_Form] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag == "form":
            self.forms.append(_Form(values))
        elif tag == "input" and self.forms:
            self.forms[-1].inputs.append(values)


class AuthorizationDenied(Exception):
    """The authorization server redirected back with an ``error``."""

    def __init__(self, params: Mapping[str, list[str]]) -> None:
        super().__init__(params.get("error", ["?"])[0])
        self.params = params


def _same_endpoint(url: str, target: str) -> bool:
    a, b = urlsplit(url), urlsplit(target)
    return (a.scheme, a.netloc, a.path) == (b.scheme, b.netloc, b.path)


async def authorize(
    http: httpx.AsyncClient,
    url: str,
    username: str,
    password: str,
    *,
    allow: bool = True,
    pages: list[str] | None = None,
) -> dict[str, list[str]]:
    """Follow an authorization URL through login and consent; return the redirect's query.

    Stops at the first redirect to the request's ``redirect_uri`` (nothing listens there).

    Raises:
        AuthorizationDenied: the redirect carries an ``error``.
    """
    redirect_uri = parse_qs(urlsplit(url).query)["redirect_uri"][0]
    response = await http.get(url)
    for _ in range(10):
        if response.is_redirect:
            location = urljoin(str(response.url), response.headers["location"])
            if _same_endpoint(location, redirect_uri):
                params = parse_qs(urlsplit(location).query)
                if "error" in params:
                    raise AuthorizationDenied(params)
                return params
            response = await http.get(location)
            continue
        assert response.status_code == 200, response.text
        if pages is not None:
            pages.append(response.text)
        response = await _submit(http, response, username, password, allow)
    raise AssertionError("the authorization did not finish within 10 steps")


async def _submit(
    http: httpx.AsyncClient, page: httpx.Response, username: str, password: str, allow: bool
) -> httpx.Response:
    parser = _Forms()
    parser.feed(page.text)
    for form in parser.forms:
        fields = {i["name"]: i.get("value", "") for i in form.inputs if i.get("name")}
        action = urljoin(str(page.url), form.attrs.get("action") or str(page.url))
        headers = {"referer": str(page.url)}
        if any(i.get("type") == "password" for i in form.inputs):
            fields.update(username=username, password=password)
            return await http.post(action, data=fields, headers=headers)
        if form.attrs.get("id") == "authorizationForm":
            if allow:
                fields["allow"] = "Authorize"
            return await http.post(action, data=fields, headers=headers)
    raise AssertionError(f"no login or consent form on {page.url}:\n{page.text[:2000]}")
