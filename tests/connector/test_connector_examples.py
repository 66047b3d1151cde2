"""The guide's examples run: against the scripted backend now, against the real one later.

`run()` / `run_agent()` are the examples' logic; their `main()` only reads the environment. The
stdio test starts the real `understudy-mcp` process, talking HTTP to the scripted backend on a
loopback port, exactly as `mcp_agent.py` does in production.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from mcp import Client as McpClient

from understudy_connector.mcp_server import McpSettings, build_server

from .scripted import (
    API_KEY,
    BASE_URL,
    SESSION_ID,
    FakeClock,
    MakeClient,
    ScriptedBackend,
    outcome,
    result_for,
    served,
    session,
    tombstone,
)

if TYPE_CHECKING:
    from types import ModuleType

EXAMPLES = Path(__file__).parents[2] / "docs" / "guide" / "examples"
CREATE = ("POST", "/v1/sessions")
SUBMIT = ("POST", f"/v1/sessions/{SESSION_ID}/commands")
DELETE = ("DELETE", f"/v1/sessions/{SESSION_ID}")
WELCOME = {
    "name": "snapshot",
    "url": "https://example.com/home",
    "title": "Welcome, Jane",
    "generation": 3,
    "truncated": False,
    "nodes": [{"ref": "g3e1", "role": "link", "name": "Sign out", "depth": 1}],
}


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"guide_example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def preview(name: str) -> dict[str, object]:
    return result_for(name, targetRole="textbox", targetName="field", allowed=True)


def test_scripted_login_fills_the_form_with_the_vaulted_secret(
    make_client: MakeClient, capsys: pytest.CaptureFixture[str]
) -> None:
    example = load("scripted_login")
    client, backend = make_client(
        session(201),
        outcome("navigate", result=preview("navigate")),
        outcome("navigate"),
        outcome("snapshot"),
        outcome("fill", result=preview("fill")),
        outcome("fill"),
        outcome("fill_secret", result=preview("fill_secret")),
        outcome("fill_secret"),
        outcome("click", result=preview("click")),
        outcome("click"),
        outcome("wait_for"),
        outcome("snapshot", result=WELCOME),
        tombstone(),
    )
    page = example.run(
        client,
        login_url="https://example.com/login",
        username="jane@example.com",
        secret_ref="vault:login-password",  # noqa: S106 - a vault name, not a secret
    )
    assert page.title == "Welcome, Jane"
    assert backend.calls == [CREATE] + [SUBMIT] * 11 + [DELETE]
    sent = [(r.body["command"]["name"], r.body["dryRun"]) for r in backend.requests[1:-1]]
    assert sent == [
        ("navigate", True), ("navigate", False), ("snapshot", False),
        ("fill", True), ("fill", False), ("fill_secret", True), ("fill_secret", False),
        ("click", True), ("click", False), ("wait_for", False), ("snapshot", False),
    ]  # fmt: skip
    commands = [r.body["command"] for r in backend.requests[1:-1]]
    assert commands[4] == {"name": "fill", "ref": "g2e5", "value": "jane@example.com"}
    assert commands[6] == {
        "name": "fill_secret",
        "ref": "g2e6",
        "secretRef": "vault:login-password",
    }
    assert commands[8]["ref"] == "g2e7"
    assert backend.requests[0].body["allowedOrigins"] == ["https://example.com"]
    audit = capsys.readouterr().err
    assert '"stage": "outcome"' in audit
    assert "jane@example.com" not in audit, "the example's audit sink is content-free"


async def test_mcp_agent_runs_in_process(clock: FakeClock) -> None:
    example = load("mcp_agent")
    backend = ScriptedBackend(
        # The navigate is answered with the page (a snapshot after the write), then the agent
        # asks for a snapshot of its own.
        [session(201), outcome("navigate"), outcome("snapshot"), outcome("snapshot"), tombstone()]
    )
    settings = McpSettings(
        url=BASE_URL,
        api_key=API_KEY,
        allowed_origins=("https://example.com",),
        profile_state_key="example-agent",
        approve="all",
    )
    server = build_server(settings, transport=backend.transport(), sleep=clock.async_sleep)
    async with McpClient(server) as client:
        text = await example.run_agent(client, start_url="https://example.com/login")
    assert "[ref=g2e7]" in text
    assert backend.calls == [CREATE, SUBMIT, SUBMIT, SUBMIT, DELETE]


@pytest.mark.slow
async def test_mcp_agent_runs_understudy_mcp_over_stdio() -> None:
    example = load("mcp_agent")
    backend = ScriptedBackend(
        # The navigate is answered with the page (a snapshot after the write), then the agent
        # asks for a snapshot of its own.
        [session(201), outcome("navigate"), outcome("snapshot"), outcome("snapshot"), tombstone()]
    )
    with served(backend) as url:
        environ = {
            "UNDERSTUDY_URL": url,
            "UNDERSTUDY_API_KEY": API_KEY,
            "UNDERSTUDY_ALLOWED_ORIGINS": "https://example.com",
            "UNDERSTUDY_PROFILE_KEY": "example-agent",
            "PATH": os.environ.get("PATH", ""),
        }
        text = await example.run_over_stdio(environ, "https://example.com/login")
    assert "[ref=g2e7]" in text
    assert backend.calls == [CREATE, SUBMIT, SUBMIT, SUBMIT, DELETE]
    assert backend.requests[0].headers["authorization"] == f"Bearer {API_KEY}"
    assert example.server_parameters(environ).command == sys.executable
