"""An agent's side of `understudy-mcp`: start the server over stdio and call its tools.

A real agent framework would hand the tool list to a model and let it choose; this script plays
that part with a fixed plan (navigate, then snapshot) so the wiring is easy to see.

Run it against a running backend with an enrolled, online device:

    UNDERSTUDY_URL=http://127.0.0.1:8787 \\
    UNDERSTUDY_API_KEY=usk_... \\
    UNDERSTUDY_ALLOWED_ORIGINS=https://example.com \\
    UNDERSTUDY_PROFILE_KEY=example-agent \\
    START_URL=https://example.com/ \\
    python docs/guide/examples/mcp_agent.py

Writes are allowed here (`UNDERSTUDY_MCP_APPROVE=all`) unless the environment says otherwise.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import anyio
from mcp import Client, StdioServerParameters, types

if TYPE_CHECKING:
    from collections.abc import Mapping

PASSED_THROUGH = (
    "UNDERSTUDY_URL",
    "UNDERSTUDY_API_KEY",
    "UNDERSTUDY_MODE",
    "UNDERSTUDY_ALLOWED_ORIGINS",
    "UNDERSTUDY_PROFILE_KEY",
    "UNDERSTUDY_DEVICE_ID",
    "UNDERSTUDY_MCP_APPROVE",
    "UNDERSTUDY_MCP_AUDIT",
)


def server_parameters(environ: Mapping[str, str]) -> StdioServerParameters:
    """How to launch `understudy-mcp` (the console script's module, with this interpreter)."""
    env = {name: environ[name] for name in PASSED_THROUGH if name in environ}
    env.setdefault("UNDERSTUDY_MCP_APPROVE", "all")
    return StdioServerParameters(
        command=sys.executable, args=["-m", "understudy_connector.mcp_server"], env=env
    )


def text_of(result: types.CallToolResult) -> str:
    """The text blocks of a tool result."""
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def run_agent(client: Client, *, start_url: str) -> str:
    """List the tools, navigate to `start_url` and return the text of a snapshot."""
    listed = await client.list_tools()
    writes = [
        tool.name for tool in listed.tools if tool.annotations and tool.annotations.destructive_hint
    ]
    print(f"{len(listed.tools)} tools; writes: {', '.join(writes)}", file=sys.stderr)
    navigated = await client.call_tool("browser_navigate", {"url": start_url})
    if navigated.is_error:
        # The server's error texts say what happened and what to do next; an agent reads them.
        raise RuntimeError(text_of(navigated))
    snapshot = await client.call_tool("browser_snapshot", {"interactiveOnly": True})
    if snapshot.is_error:
        raise RuntimeError(text_of(snapshot))
    return text_of(snapshot)


async def run_over_stdio(environ: Mapping[str, str], start_url: str) -> str:
    """Start `understudy-mcp` as a subprocess and run the agent against it."""
    async with Client(server_parameters(environ)) as client:
        return await run_agent(client, start_url=start_url)


def main() -> None:
    """Run the agent with the configuration in the environment."""
    print(anyio.run(run_over_stdio, dict(os.environ), os.environ["START_URL"]))


if __name__ == "__main__":
    main()
