"""The management API goes on answering while Redis is down (issue #25).

Its throttles counted in Redis with no fallback, so every API request, ``/api/schema/``
included, was a 500 for as long as Redis was gone. The fault stack's Redis is SIGKILLed under
a real web process; the API must answer with a valid token, refuse made-up tokens (counted in
the process meanwhile) and say once in its log that it counts without Redis.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import httpx

from tests.faults.conftest import FaultStack, WebProcess, run_manage

CREATE_TOKEN = """
from django.contrib.auth.models import User
from mcp_app.services.api_tokens import api_token_create
user = User.objects.create_superuser({username!r}, password="unused-password-123")
print(api_token_create(user=user, name="outage")[1])
"""
FAILURES = 3


def test_the_api_answers_while_redis_is_down(
    fault_stack: FaultStack, web_process: Callable[..., WebProcess]
) -> None:
    key = run_manage(
        fault_stack.env, "shell", "-c", CREATE_TOKEN.format(username=f"u{uuid.uuid4().hex}")
    ).split()[-1]
    web = web_process("uvicorn", env={"API_THROTTLE_AUTH_FAILURES": f"{FAILURES}/day"})
    api = f"{web.base_url}/api"
    with httpx.Client(timeout=10, headers={"authorization": f"Bearer {key}"}) as client:
        assert client.get(f"{api}/v1/endpoints/").status_code == 200
        fault_stack.redis.kill()
        try:
            listed = client.get(f"{api}/v1/endpoints/")
            created = client.post(f"{api}/v1/endpoints/", json={"slug": f"e{uuid.uuid4().hex}"})
            schema = client.get(f"{api}/schema/")
            made_up = [
                client.get(
                    f"{api}/v1/endpoints/", headers={"authorization": f"Bearer mcpk_{n}"}
                ).status_code
                for n in range(FAILURES + 1)
            ]
        finally:
            fault_stack.redis.start()

    assert listed.status_code == 200, listed.text
    assert created.status_code == 201, created.text
    assert schema.status_code == 200
    assert made_up == [401] * FAILURES + [429]
    assert web.log().count("API throttles count per process: Redis unavailable") == 1
