"""`understudy-mcp` end to end against the running backend, through the MCP SDK's client."""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

from mcp import Client as McpClient
from mcp import types

from understudy_connector.generated.catalog import COMMAND_KINDS
from understudy_connector.mcp_server import ApprovalPolicy, McpSettings, build_server

from .conftest import granted, tombstoned

if TYPE_CHECKING:
    from .conftest import Live


def text(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def deleted_once(live: Live) -> None:
    """The server deleted its one session when it stopped."""
    (delete,) = [e for e in live.http.exchanges if e.method == "DELETE"]
    session_id = uuid.UUID(delete.path.rsplit("/", 1)[1])
    assert await tombstoned(live, session_id)


def settings(live: Live, approve: ApprovalPolicy) -> McpSettings:
    return McpSettings(
        url=live.url,
        api_key=live.api_key,
        allowed_origins=("https://example.com",),
        profile_state_key="agent",
        approve=approve,
    )


async def test_the_server_lists_the_catalog_and_runs_a_read_and_a_write(live: Live) -> None:
    device = await live.device()
    server = build_server(settings(live, "all"), transport=live.http, sleep=live.pace)
    async with McpClient(server) as agent:
        listed = await agent.list_tools()
        kinds = {tool.name.removeprefix("browser_"): tool.annotations for tool in listed.tools}
        assert all(tool.name.startswith("browser_") for tool in listed.tools)
        assert set(kinds) == set(COMMAND_KINDS)
        for name, annotations in kinds.items():
            assert annotations is not None
            assert annotations.read_only_hint is (COMMAND_KINDS[name] == "read")

        page = await agent.call_tool("browser_snapshot", {"interactiveOnly": True})
        assert not page.is_error, text(page)
        assert 'button "Sign in" [g1e1]' in text(page)

        clicked = await agent.call_tool("browser_click", {"ref": "g1e1"})
        assert not clicked.is_error, text(clicked)
        assert text(clicked).startswith("click done.")
        assert "The page now:\n# Example" in text(clicked)
        assert list(device.executions.values()) == [1]

        # An unknown outcome is reported as such and never retried.
        device.behaviour.execute = "crash_after_start"
        call = asyncio.ensure_future(
            agent.call_tool("browser_fill", {"ref": "g1e2", "value": "jane"})
        )
        lost = await granted(device, count=2)
        await device.restart_extension()
        unknown = await call
        assert unknown.is_error
        assert text(unknown).startswith("Outcome UNKNOWN: browser_fill")
        assert [e.status for e in live.http.commands(lost)] == [409]
        assert device.executions[lost] == 1

        # Further writes are blocked by the backend; the agent is told reads still work.
        device.behaviour.execute = "complete"
        blocked = await agent.call_tool("browser_click", {"ref": "g1e1"})
        assert blocked.is_error
        assert "writes in this browser session are blocked" in text(blocked)
        assert "an earlier write's outcome is unknown" in text(blocked)
        assert sum(device.executions.values()) == 2

    await deleted_once(live)


async def test_writes_refused_by_the_policy_never_reach_the_device(live: Live) -> None:
    device = await live.device()
    server = build_server(settings(live, "none"), transport=live.http, sleep=live.pace)
    async with McpClient(server) as agent:
        refused = await agent.call_tool("browser_click", {"ref": "g1e1"})
        assert refused.is_error
        assert "refused by the approval policy (UNDERSTUDY_MCP_APPROVE=none)" in text(refused)
        preview = await agent.call_tool("browser_click", {"ref": "g1e1", "dryRun": True})
        assert not preview.is_error, text(preview)
        assert "Dry run of click: nothing changed. It would act on: button Sign in." in text(
            preview
        )
    assert device.executions == {}
    await deleted_once(live)
