"""`understudy-mcp`: the command catalog as MCP tools, bound to one Understudy session.

The server creates one session when it starts and deletes it when it stops. Every catalog command
is a tool with its catalog input schema and read/write annotations. Writes go through an approval
hook (by default the policy in `UNDERSTUDY_MCP_APPROVE`); an unknown outcome is reported as unknown
and never retried.

Configuration (environment; the options of `understudy-mcp --help` override it, except the key):

| Variable | Meaning |
|---|---|
| `UNDERSTUDY_URL` | Service origin, e.g. `http://127.0.0.1:8787` (required) |
| `UNDERSTUDY_API_KEY` | Consumer API key (required; never accepted as an option) |
| `UNDERSTUDY_MODE` | `unattended` (default) or `attended` |
| `UNDERSTUDY_ALLOWED_ORIGINS` | Comma-separated exact origins (unattended) |
| `UNDERSTUDY_PROFILE_KEY` | Profile-state key (unattended) |
| `UNDERSTUDY_DEVICE_ID` | Explicit device (optional) |
| `UNDERSTUDY_MCP_APPROVE` | `none` (default: refuse writes), `all`, or `reads-only` (hide writes) |
| `UNDERSTUDY_MCP_AUDIT` | `stderr` to print content-free audit events as JSON lines |
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, cast, get_args

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from understudy_connector import _commands as build
from understudy_connector._client import AsyncClient
from understudy_connector._exceptions import CommandFailed, UnderstudyError, UsageError
from understudy_connector._mcp_tools import (
    CatalogTool,
    catalog_tools,
    explain,
    failure,
    parse_arguments,
    success,
)
from understudy_connector.generated import models
from understudy_connector.generated.catalog import COMMAND_KINDS

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence

    import httpx
    from mcp.server.context import ServerRequestContext

    from understudy_connector._audit import AuditEvent, AuditHook
    from understudy_connector._hooks import ApproveHook, WriteRequest
    from understudy_connector._session import AsyncSession

__all__ = ["ApprovalPolicy", "McpSettings", "build_server", "main"]

ApprovalPolicy = Literal["none", "all", "reads-only"]
POLICIES: Final[tuple[str, ...]] = get_args(ApprovalPolicy)
INSTRUCTIONS: Final = (
    "These tools drive one browser tab through Understudy. Start with snapshot: it lists the "
    "page one element per line, with refs in brackets (like [g2e14]; a link reads "
    "[text](g2e14)) that click, fill and the other writes take. '…[cut: N chars]' ends a text "
    "that was cut. To see only what changed on the same page, pass the snapshot id from the "
    "first line as changesSince. A navigation retires old refs, so take a new snapshot after "
    "it. Writes need approval; an "
    "'unknown' outcome means the write may or may not have happened: check with snapshot, never "
    "repeat it blindly."
)


@dataclass(frozen=True)
class McpSettings:
    """What the server needs to bind itself to one session.

    Attributes:
        url: The Understudy service origin.
        api_key: A consumer API key.
        mode: `unattended` or `attended`.
        allowed_origins: Unattended: the exact origins navigation may reach.
        profile_state_key: Unattended: the browser state the session expects.
        device_id: Unattended: an explicit device, never falling back to another.
        approve: The approval policy for writes.
        audit_to_stderr: Print content-free audit events to stderr as JSON lines.
    """

    url: str
    api_key: str = field(repr=False)
    mode: Literal["unattended", "attended"] = "unattended"
    allowed_origins: tuple[str, ...] = ()
    profile_state_key: str | None = None
    device_id: str | None = None
    approve: ApprovalPolicy = "none"
    audit_to_stderr: bool = False

    @classmethod
    def load(
        cls, argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
    ) -> McpSettings:
        """Settings from the environment, overridden by command-line options.

        Raises:
            UsageError: A required setting is missing or a value is not allowed.
        """
        env = os.environ if environ is None else environ
        options = _parser().parse_args(argv)
        url = options.url or env.get("UNDERSTUDY_URL", "")
        api_key = env.get("UNDERSTUDY_API_KEY", "")
        if not url:
            raise UsageError("set UNDERSTUDY_URL (or --url) to the Understudy service origin")
        if not api_key:
            raise UsageError("set UNDERSTUDY_API_KEY to a consumer API key (usk_...)")
        mode = options.mode or env.get("UNDERSTUDY_MODE", "unattended")
        if mode not in ("unattended", "attended"):
            raise UsageError(f"UNDERSTUDY_MODE must be unattended or attended, not {mode!r}")
        policy = options.approve or env.get("UNDERSTUDY_MCP_APPROVE", "none")
        if policy not in POLICIES:
            raise UsageError(f"UNDERSTUDY_MCP_APPROVE must be one of {', '.join(POLICIES)}")
        origins = options.allowed_origin or [
            origin.strip()
            for origin in env.get("UNDERSTUDY_ALLOWED_ORIGINS", "").split(",")
            if origin.strip()
        ]
        return cls(
            url=url,
            api_key=api_key,
            mode=cast("Literal['unattended', 'attended']", mode),
            allowed_origins=tuple(origins),
            profile_state_key=options.profile_key or env.get("UNDERSTUDY_PROFILE_KEY") or None,
            device_id=options.device_id or env.get("UNDERSTUDY_DEVICE_ID") or None,
            approve=cast("ApprovalPolicy", policy),
            audit_to_stderr=env.get("UNDERSTUDY_MCP_AUDIT", "") == "stderr",
        )


def policy_hook(policy: ApprovalPolicy) -> ApproveHook:
    """The approval hook of an environment policy: `all` approves every write, others none."""

    def decide(request: WriteRequest) -> bool:
        return policy == "all"

    return decide


@dataclass(frozen=True)
class _Bound:
    session: AsyncSession
    tools: dict[str, CatalogTool]
    policy: str


def build_server(
    settings: McpSettings,
    *,
    approve: ApproveHook | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    sleep: Callable[[float], Awaitable[None]] | None = None,
) -> Server[_Bound]:
    """An MCP server exposing the catalog, bound to one session for its lifetime.

    Args:
        settings: Where and how to create the session.
        approve: An approval hook for writes; by default the policy in `settings.approve`.
        transport: An httpx transport for the Understudy API (tests pass a mock).
        sleep: How to wait between retries (tests pass a fake).
    """
    hook = approve or policy_hook(settings.approve)
    policy = "custom hook" if approve is not None else f"UNDERSTUDY_MCP_APPROVE={settings.approve}"
    visible = {
        tool.name: tool
        for tool in catalog_tools()
        if settings.approve != "reads-only" or tool.kind == "read"
    }
    audit: AuditHook | None = _print_audit if settings.audit_to_stderr else None
    extra: dict[str, Any] = {} if sleep is None else {"sleep": sleep}

    @asynccontextmanager
    async def lifespan(server: Server[_Bound]) -> AsyncIterator[_Bound]:
        async with AsyncClient(
            settings.url, settings.api_key, transport=transport, audit=audit, **extra
        ) as client:
            session = client.session(
                settings.mode,
                allowed_origins=list(settings.allowed_origins) or None,
                profile_state_key=settings.profile_state_key,
                device_id=settings.device_id,
                approve=hook,
            )
            async with session:
                yield _Bound(session, visible, policy)

    async def list_tools(
        ctx: ServerRequestContext[_Bound], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[tool.tool for tool in ctx.lifespan_context.tools.values()]
        )

    async def call_tool(
        ctx: ServerRequestContext[_Bound], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return await run_tool(ctx.lifespan_context, params.name, params.arguments or {})

    return Server(
        "understudy",
        version="0.1.0",
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def run_tool(bound: _Bound, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    """Run one tool call against the bound session; every failure becomes an actionable text."""
    tool = bound.tools.get(name)
    if tool is None:
        if COMMAND_KINDS.get(name) == "write":
            return failure(
                f"{name} is a write and writes are disabled ({bound.policy}); use read tools."
            )
        return failure(f"There is no tool named {name!r}; list the tools and pick one of them.")
    try:
        command, dry_run = parse_arguments(tool, arguments)
        try:
            result = await bound.session.execute(command, dry_run=dry_run)
        except CommandFailed as failed:
            # The compact text was this server's choice, not the agent's: from an extension that
            # predates it, the nodes (rendered as text) are the next best answer.
            chosen = "format" not in arguments and "changesSince" not in arguments
            older = (
                build.predates_compact(command, failed)
                if chosen and isinstance(command, models.SnapshotCommand)
                else None
            )
            if older is None:
                raise
            result = await bound.session.execute(older)
    except UnderstudyError as error:
        return failure(explain(error, name, bound.policy))
    return success(result)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the server over stdio (the `understudy-mcp` console script)."""
    try:
        settings = McpSettings.load(argv)
    except UsageError as error:
        print(f"understudy-mcp: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    server = build_server(settings)

    async def serve() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    failures: list[BaseException] = []
    try:
        anyio.run(serve)
    except* UnderstudyError as group:
        # The session could not be created (or deleted): say so plainly instead of a traceback.
        failures.extend(_leaves(group))
    for failed in failures:
        print(f"understudy-mcp: {failed}", file=sys.stderr)
    if failures:
        raise SystemExit(1)


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def _print_audit(event: AuditEvent) -> None:
    # stdout is the MCP channel; audit goes to stderr, content-free.
    print(json.dumps(dataclasses.asdict(event), default=str), file=sys.stderr, flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="understudy-mcp",
        description="Expose the Understudy command catalog as MCP tools over stdio, bound to one "
        "session. The API key is read from UNDERSTUDY_API_KEY only.",
    )
    parser.add_argument("--url", help="service origin (UNDERSTUDY_URL)")
    parser.add_argument("--mode", choices=["unattended", "attended"], help="(UNDERSTUDY_MODE)")
    parser.add_argument(
        "--allowed-origin",
        action="append",
        help="an exact origin; repeat for several (UNDERSTUDY_ALLOWED_ORIGINS)",
    )
    parser.add_argument("--profile-key", help="profile-state key (UNDERSTUDY_PROFILE_KEY)")
    parser.add_argument("--device-id", help="explicit device (UNDERSTUDY_DEVICE_ID)")
    parser.add_argument("--approve", choices=POLICIES, help="write policy (UNDERSTUDY_MCP_APPROVE)")
    return parser


if __name__ == "__main__":
    main()
