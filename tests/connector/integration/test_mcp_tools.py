"""`understudy-mcp` as agents call it, against the running backend and a simulated device.

The agent side is the MCP SDK's client over the in-memory transport (one test starts the real
console script over stdio); the server talks real HTTP to the backend, which drives the simulated
extension. What reached the device is read from the frames of its session socket.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from typing import TYPE_CHECKING, Any

import pytest
from mcp import Client as McpClient
from mcp import StdioServerParameters, types

from understudy.generated import models as wire
from understudy_connector.generated.catalog import COMMAND_KINDS
from understudy_connector.mcp_server import McpSettings, build_server

from .conftest import Pace, session_frames

if TYPE_CHECKING:
    from tests.support.simdevice import SimulatedDevice
    from understudy_connector import WriteRequest

    from .conftest import Live

WITHIN = 30.0


def text(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


def settings(live: Live, **changes: Any) -> McpSettings:
    values: dict[str, Any] = {
        "url": live.url,
        "api_key": live.api_key,
        "allowed_origins": ("https://example.com",),
        "profile_state_key": "agent",
        "approve": "all",
    }
    return McpSettings(**(values | changes))


def reads(device: SimulatedDevice) -> list[dict[str, Any]]:
    """The read commands the device was asked to run, as their wire JSON."""
    frames = session_frames(device)
    return [f.command.to_wire() for f in frames if isinstance(f, wire.SessionServerRead)]


def writes(device: SimulatedDevice) -> list[wire.SessionServerWriteGrant]:
    """The write grants the device received (dry runs included)."""
    frames = session_frames(device)
    return [f for f in frames if isinstance(f, wire.SessionServerWriteGrant)]


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_tools_are_named_with_the_browser_prefix_by_default(live: Live) -> None:
    await live.device()
    server = build_server(settings(live), transport=live.http, sleep=live.pace)
    async with McpClient(server) as agent:
        listed = await agent.list_tools()
        assert {tool.name for tool in listed.tools} == {f"browser_{name}" for name in COMMAND_KINDS}
        page = await agent.call_tool("browser_snapshot", {})
        assert not page.is_error, text(page)
        unprefixed = await agent.call_tool("snapshot", {})
        assert unprefixed.is_error
        assert "no tool named 'snapshot'" in text(unprefixed)


@pytest.mark.parametrize("prefix", ["web_", ""])
async def test_the_tool_prefix_is_a_setting(live: Live, prefix: str) -> None:
    device = await live.device()
    server = build_server(settings(live, tool_prefix=prefix), transport=live.http, sleep=live.pace)
    async with McpClient(server) as agent:
        listed = await agent.list_tools()
        assert {tool.name for tool in listed.tools} == {f"{prefix}{name}" for name in COMMAND_KINDS}
        clicked = await agent.call_tool(f"{prefix}click", {"ref": "g1e1"})
        assert not clicked.is_error, text(clicked)
        # Texts for the agent name the tools as listed.
        refused = await agent.call_tool(f"{prefix}click", {"ref": "button-3"})
        assert refused.is_error
        assert text(refused).startswith(f"invalid arguments for {prefix}click")
    assert list(device.executions.values()) == [1]


async def test_the_element_description_is_shown_for_approval_and_never_sent(
    live: Live, capsys: pytest.CaptureFixture[str]
) -> None:
    device = await live.device()
    asked: list[WriteRequest] = []

    def approve(request: WriteRequest) -> bool:
        asked.append(request)
        return True

    server = build_server(
        settings(live, audit_to_stderr=True), approve=approve, transport=live.http, sleep=live.pace
    )
    async with McpClient(server) as agent:
        clicked = await agent.call_tool(
            "browser_click", {"ref": "g1e1", "element": "Sign in button"}
        )
        assert not clicked.is_error, text(clicked)
        filled = await agent.call_tool("browser_fill", {"ref": "g1e2", "value": "jane"})
        assert not filled.is_error, text(filled)
        waited = await agent.call_tool(
            "browser_wait_for", {"ref": "g1e3", "element": "Password field", "state": "enabled"}
        )
        assert not waited.is_error, text(waited)
    assert [request.elements for request in asked] == [{"ref": "Sign in button"}, {}]
    assert [grant.command.to_wire() for grant in writes(device)] == [
        {"name": "click", "ref": "g1e1", "button": "left", "clickCount": 1},
        {"name": "fill", "ref": "g1e2", "value": "jane"},
    ]
    (sent,) = [command for command in reads(device) if command["name"] == "wait_for"]
    assert sent["condition"] == {"kind": "element_state", "ref": "g1e3", "state": "enabled"}
    assert "Password field" not in json.dumps(sent)
    err = capsys.readouterr().err
    audit = [json.loads(line) for line in err.splitlines()]
    assert [line["command"] for line in audit if line["stage"] == "approval"] == ["click", "fill"]
    assert "Sign in button" not in err
    assert "Password field" not in err
    assert all("Sign in button" not in json.dumps(r.body) for r in live.http.exchanges)


async def test_a_description_without_its_ref_is_refused_before_sending(live: Live) -> None:
    device = await live.device()
    server = build_server(settings(live), transport=live.http, sleep=live.pace)
    async with McpClient(server) as agent:
        alone = await agent.call_tool("browser_scroll", {"element": "the list", "deltaY": 200})
        assert alone.is_error
        assert "element goes with ref" in text(alone)
    assert writes(device) == []


async def test_a_write_that_ran_is_answered_with_a_fresh_compact_snapshot(live: Live) -> None:
    device = await live.device()
    server = build_server(settings(live), transport=live.http, sleep=live.pace)
    async with McpClient(server) as agent:
        listed = await agent.list_tools()
        (click,) = [tool for tool in listed.tools if tool.name == "browser_click"]
        assert "Answers with a fresh snapshot of the page." in (click.description or "")
        clicked = await agent.call_tool("browser_click", {"ref": "g1e1"})
        assert not clicked.is_error, text(clicked)
        first, page = [
            block.text for block in clicked.content if isinstance(block, types.TextContent)
        ]
        assert first.startswith("click done.")
        assert page.splitlines()[:3] == [
            "The page now:",
            "# Example — https://example.com/ (g1s1)",
            'button "Sign in" [g1e1]',
        ]
        assert clicked.structured_content is not None
        assert clicked.structured_content["name"] == "click"
        # A dry run changed nothing, so nothing new to see.
        preview = await agent.call_tool("browser_click", {"ref": "g1e1", "dryRun": True})
        assert "The page now" not in text(preview)
    assert reads(device) == [
        {"name": "snapshot", "interactiveOnly": False, "maxNodes": 1000, "format": "compact"}
    ]


async def test_the_snapshot_after_a_write_can_be_turned_off(live: Live) -> None:
    device = await live.device()
    server = build_server(
        settings(live, snapshot_after_write=False), transport=live.http, sleep=live.pace
    )
    async with McpClient(server) as agent:
        listed = await agent.list_tools()
        clicked = await agent.call_tool("browser_click", {"ref": "g1e1"})
    assert text(clicked).startswith("click done.")
    assert "The page now" not in text(clicked)
    assert reads(device) == []
    (click,) = [tool for tool in listed.tools if tool.name == "browser_click"]
    assert "fresh snapshot" not in (click.description or "")


@pytest.mark.parametrize(
    ("arguments", "condition"),
    [
        ({"text": "Welcome"}, {"kind": "text_appears", "text": "Welcome"}),
        ({"textGone": "Loading"}, {"kind": "text_disappears", "text": "Loading"}),
        ({"url": "/dashboard"}, {"kind": "url_matches", "urlContains": "/dashboard"}),
        (
            {"ref": "g1e1", "state": "hidden"},
            {"kind": "element_state", "ref": "g1e1", "state": "hidden"},
        ),
        ({"ref": "g1e1"}, {"kind": "element_state", "ref": "g1e1", "state": "visible"}),
    ],
)
async def test_wait_for_takes_flat_arguments_for_each_condition_kind(
    live: Live, arguments: dict[str, Any], condition: dict[str, Any]
) -> None:
    device = await live.device()
    server = build_server(settings(live), transport=live.http, sleep=live.pace)
    async with McpClient(server) as agent:
        waited = await agent.call_tool("browser_wait_for", arguments | {"timeoutMs": 2000})
    assert not waited.is_error, text(waited)
    assert waited.structured_content == {"name": "wait_for", "matched": True, "elapsedMs": 1}
    assert reads(device) == [{"name": "wait_for", "condition": condition, "timeoutMs": 2000}]


async def test_wait_for_time_only_waits_and_asks_nothing_of_the_page(live: Live) -> None:
    device = await live.device()
    server = build_server(settings(live), transport=live.http, sleep=live.pace)
    async with McpClient(server) as agent:
        waited = await agent.call_tool("browser_wait_for", {"time": 2.5})
    assert text(waited) == "Waited 2.5 s."
    assert 2.5 in live.pace.delays
    assert reads(device) == []


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({}, "pass exactly one of text, textGone, url, ref, time (got none)"),
        ({"text": "a", "url": "/b"}, "(got text, url)"),
        ({"text": "a", "state": "hidden"}, "state goes with ref"),
        ({"time": 1, "timeoutMs": 2000}, "time waits alone"),
        ({"time": 60}, "at most 15"),
        ({"text": ""}, "text"),
    ],
)
async def test_wait_for_refuses_arguments_that_do_not_go_together(
    live: Live, arguments: dict[str, Any], says: str
) -> None:
    device = await live.device()
    server = build_server(settings(live), transport=live.http, sleep=live.pace)
    async with McpClient(server) as agent:
        waited = await agent.call_tool("browser_wait_for", arguments)
    assert waited.is_error
    assert says in text(waited)
    assert reads(device) == []


async def test_a_wrong_key_is_a_tool_error_and_the_server_still_lists_tools(live: Live) -> None:
    await live.device()
    wrong = settings(live, api_key="usk_not-a-key")
    server = build_server(wrong, transport=live.http, sleep=live.pace)
    async with McpClient(server) as agent:
        listed = await agent.list_tools()
        assert len(listed.tools) == len(COMMAND_KINDS)
        page = await agent.call_tool("browser_snapshot", {})
    assert page.is_error
    assert text(page).startswith("browser_snapshot cannot run: the browser session could not be")
    assert "refused the API key (401 unauthorized" in text(page)
    assert "UNDERSTUDY_API_KEY" in text(page)
    # Created at start, tried again for the call; never a session, never a delete.
    assert [(e.method, e.path, e.status) for e in live.http.exchanges] == [
        ("POST", "/v1/sessions", 401),
        ("POST", "/v1/sessions", 401),
    ]


async def test_an_unreachable_service_is_a_tool_error_naming_the_address(live: Live) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    server = build_server(settings(live, url=url), transport=live.http, sleep=live.pace)
    async with McpClient(server) as agent:
        listed = await agent.list_tools()
        assert len(listed.tools) == len(COMMAND_KINDS)
        clicked = await agent.call_tool("browser_click", {"ref": "g1e1"})
    assert clicked.is_error
    assert f"could not be created at {url}" in text(clicked)
    assert "could not be reached (ConnectError: Connection refused)" in text(clicked)
    assert "UNDERSTUDY_URL" in text(clicked)


@pytest.mark.slow
async def test_the_console_script_starts_without_a_service(live: Live) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    environ = {
        "UNDERSTUDY_URL": url,
        "UNDERSTUDY_API_KEY": "usk_x",
        "UNDERSTUDY_ALLOWED_ORIGINS": "https://example.com",
        "UNDERSTUDY_PROFILE_KEY": "agent",
        "PATH": os.environ.get("PATH", ""),
    }
    parameters = StdioServerParameters(
        command=sys.executable, args=["-m", "understudy_connector.mcp_server"], env=environ
    )

    async def agent() -> tuple[list[str], types.CallToolResult]:
        async with McpClient(parameters) as client:
            listed = await client.list_tools()
            return [tool.name for tool in listed.tools], await client.call_tool(
                "browser_get_tabs", {}
            )

    names, result = await asyncio.wait_for(agent(), WITHIN)
    assert "browser_get_tabs" in names
    assert result.is_error
    assert f"could not be created at {url}" in text(result)
    assert "Connection refused" in text(result)


async def test_the_tools_are_listed_while_the_session_waits_for_a_device(live: Live) -> None:
    device = await live.device(connect=False)
    # Slower than the default pace: each wait for a device is a request the backend's rate
    # backstop counts on a clock this test does not move.
    server = build_server(settings(live), transport=live.http, sleep=Pace(real=0.25))

    async def agent() -> types.CallToolResult:
        async with McpClient(server) as client:
            listed = await client.list_tools()
            assert len(listed.tools) == len(COMMAND_KINDS)
            assert [e.status for e in live.http.creations()] in ([], [503]), "still waiting"
            await device.connect()
            return await client.call_tool("browser_snapshot", {})

    page = await asyncio.wait_for(agent(), WITHIN)
    assert not page.is_error, text(page)
    statuses = [e.status for e in live.http.creations()]
    assert statuses[-1] == 201
    assert set(statuses[:-1]) <= {503}, statuses
