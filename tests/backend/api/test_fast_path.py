"""The command route's fast path answers every request exactly as the Litestar route does.

Each request goes once through the server (which serves `POST /v1/sessions/{id}/commands` with a
plain body through `FastCommands`) and once straight to the Litestar app behind it; the status,
the headers a client reads and the body must be the same. A write sent twice with one command id
is a replay, so the second answer is the first one's durable outcome and must match too.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.backend.conftest import post_create, unattended
from understudy._security import generate_token
from understudy.http._fast import FastCommands

if TYPE_CHECKING:
    from tests.backend.conftest import Backend

_COMPARED = ("content-type", "content-length", "retry-after", "www-authenticate", "location")


def _inner_app(backend: Backend) -> Any:
    served = backend.server.config.app
    assert isinstance(served, FastCommands)  # the server takes the fast path at all
    return served.app


def _answer(response: httpx.Response) -> tuple[int, dict[str, str], Any]:
    headers = {name: response.headers[name] for name in _COMPARED if name in response.headers}
    return response.status_code, headers, response.json()


def _cases(key: str, sid: str) -> list[tuple[str, str, dict[str, str], bytes]]:
    """(name, path, headers, body) of requests with one answer each."""
    auth = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    path = f"/v1/sessions/{sid}/commands"
    written = uuid.uuid4()
    click = b'{"commandId": "%s", "command": {"name": "click", "ref": "g1e1"}}' % (
        str(written).encode()
    )
    return [
        ("write", path, auth, click),
        ("replay", path, auth, click),
        (
            "id_conflict",
            path,
            auth,
            b'{"commandId": "%s", "command": {"name": "snapshot"}}' % str(written).encode(),
        ),
        (
            "read",
            path,
            auth,
            b'{"commandId": "%s", "command": {"name": "snapshot", "interactiveOnly": true}}'
            % str(uuid.uuid4()).encode(),
        ),
        ("no_credential", path, {"Content-Type": "application/json"}, click),
        (
            "device_credential",
            path,
            {**auth, "Authorization": f"Bearer {generate_token('device')}"},
            click,
        ),
        ("session_id_not_a_uuid", "/v1/sessions/not-a-uuid/commands", auth, click),
        ("unknown_session", f"/v1/sessions/{uuid.uuid4()}/commands", auth, click),
        ("empty_body", path, auth, b""),
        ("text_plain", path, {**auth, "Content-Type": "text/plain"}, click),
        ("not_json", path, auth, b'{"commandId": '),
        ("nan", path, auth, b'{"commandId": "%s", "x": NaN}' % str(uuid.uuid4()).encode()),
        (
            "repeated_key",
            path,
            auth,
            b'{"commandId": "%s", "dryRun": true, "dryRun": false, "command": {"name": "click"}}'
            % str(uuid.uuid4()).encode(),
        ),
        (
            "braced_uuid",
            path,
            auth,
            b'{"commandId": "{%s}", "command": {"name": "click", "ref": "g1e1"}}'
            % str(uuid.uuid4()).encode(),
        ),
        (
            "unknown_command",
            path,
            auth,
            b'{"commandId": "%s", "command": {"name": "fly"}}' % str(uuid.uuid4()).encode(),
        ),
        ("not_an_object", path, auth, b"[1, 2.0]"),
        (
            "integral_float",
            path,
            auth,
            b'{"commandId": "%s", "command": {"name": "snapshot", "maxNodes": 5e1}}'
            % str(uuid.uuid4()).encode(),
        ),
        (
            "fractional_float",
            path,
            auth,
            b'{"commandId": "%s", "command": {"name": "snapshot", "maxNodes": 50.5}}'
            % str(uuid.uuid4()).encode(),
        ),
    ]


@pytest.mark.parametrize("name", [case[0] for case in _cases("k", "s")])
async def test_the_fast_path_answers_like_the_route(backend: Backend, name: str) -> None:
    key = backend.api_key()
    await backend.device()
    async with backend.client(key) as http:
        created = await post_create(backend, http, unattended())
        assert created.status_code == 201, created.text
        sid = created.json()["sessionId"]
        await backend.until(lambda: backend.services.session_agent(sid).available, "socket up")
        cases = {case[0]: case for case in _cases(key, sid)}
        # The cases that need an admitted write first get it through the same path.
        before = ["write"] if name in ("replay", "id_conflict") else []
        inner = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=_inner_app(backend)), base_url=backend.url
        )
        async with httpx.AsyncClient(base_url=backend.url) as served, inner:
            for step in before:
                _, path, headers, body = cases[step]
                await served.post(path, content=body, headers=headers)
            _, path, headers, body = cases[name]
            fast = await served.post(path, content=body, headers=headers)
            routed = await inner.post(path, content=body, headers=headers)
    assert _answer(fast) == _answer(routed)
