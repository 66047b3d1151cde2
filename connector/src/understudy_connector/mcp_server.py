"""`understudy-mcp`: the command catalog as MCP tools, bound to one Understudy session.

The server creates one session when it starts and deletes it when it stops. Every catalog command
is a tool named with a prefix (`browser_click`, `browser_snapshot`, ...), with its catalog input
schema, an optional `element` description beside each ref, and read/write annotations. Writes go
through an approval hook (by default the policy in `UNDERSTUDY_MCP_APPROVE`); an unknown outcome
is reported as unknown and never retried; a write that ran is answered with a fresh compact
snapshot of the page. When the session cannot be created (a refused key, an unreachable service,
no device), the server still starts and lists its tools, and each call says why it cannot run
(and tries to create the session again).

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
| `UNDERSTUDY_MCP_AUDIT` | `stderr` to print audit events as JSON lines |
| `UNDERSTUDY_MCP_TOOL_PREFIX` | Put before each command name (default `browser_`; empty: none) |
| `UNDERSTUDY_MCP_SNAPSHOT_AFTER_WRITE` | `on` (default) or `off`: snapshot after each write |
"""

from __future__ import annotations

import argparse
import contextvars
import dataclasses
import json
import os
import re
import sys
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal, cast, get_args

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from understudy_connector import _commands as build
from understudy_connector._client import AsyncClient
from understudy_connector._exceptions import (
    BackendUnreachable,
    CommandFailed,
    ProblemError,
    Unauthorized,
    UnderstudyError,
    UsageError,
)
from understudy_connector._mcp_tools import (
    DEFAULT_TOOL_PREFIX,
    MCP_SNAPSHOT_FORMAT,
    CatalogTool,
    ToolCall,
    ToolNames,
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
TOOL_PREFIX_PATTERN: Final = re.compile(r"[A-Za-z0-9_.-]{0,40}")
"""MCP tool names are letters, digits, `_`, `-` and `.`; a prefix leaves room for the command."""
SWITCHES: Final[dict[str, bool]] = {
    "on": True,
    "true": True,
    "1": True,
    "yes": True,
    "off": False,
    "false": False,
    "0": False,
    "no": False,
}

# The `element` descriptions of the tool call being run, for the approval hook and the audit
# lines: they belong to the call, never to the command, so they travel beside it.
_ELEMENTS: contextvars.ContextVar[Mapping[str, str]] = contextvars.ContextVar(
    "understudy_mcp_elements", default=MappingProxyType({})
)


def instructions(names: ToolNames) -> str:
    """The server's instructions to the agent, with its tool names."""
    return (
        f"These tools drive one browser tab through Understudy. Start with {names.snapshot}: it "
        "lists the page one element per line, with refs in brackets (like [g2e14]; a link reads "
        f"[text](g2e14)) that {names('click')}, {names('fill')} and the other writes take; give "
        "each ref an element description too (like 'Sign in button'): it is shown to whoever "
        "approves the write. '…[cut: N chars]' ends a text that was cut. To see only what "
        "changed on the same page, pass the snapshot id from the first line as changesSince. A "
        "navigation retires old refs, so take a new snapshot after it. Writes need approval; an "
        "'unknown' outcome means the write may or may not have happened: check with "
        f"{names.snapshot}, never repeat it blindly."
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
        audit_to_stderr: Print audit events to stderr as JSON lines.
        tool_prefix: Put before each catalog command name to make its tool name.
        snapshot_after_write: End the result of each write that ran with a compact snapshot.
    """

    url: str
    api_key: str = field(repr=False)
    mode: Literal["unattended", "attended"] = "unattended"
    allowed_origins: tuple[str, ...] = ()
    profile_state_key: str | None = None
    device_id: str | None = None
    approve: ApprovalPolicy = "none"
    audit_to_stderr: bool = False
    tool_prefix: str = DEFAULT_TOOL_PREFIX
    snapshot_after_write: bool = True

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
        prefix = options.tool_prefix
        if prefix is None:
            prefix = env.get("UNDERSTUDY_MCP_TOOL_PREFIX", DEFAULT_TOOL_PREFIX)
        if not TOOL_PREFIX_PATTERN.fullmatch(prefix):
            raise UsageError(
                "UNDERSTUDY_MCP_TOOL_PREFIX (--tool-prefix) may hold only letters, digits, _, - "
                f"and ., at most 40 of them, not {prefix!r}"
            )
        snapshots = options.snapshot_after_write
        if snapshots is None:
            switch = env.get("UNDERSTUDY_MCP_SNAPSHOT_AFTER_WRITE", "on").strip().lower()
            if switch not in SWITCHES:
                raise UsageError(
                    f"UNDERSTUDY_MCP_SNAPSHOT_AFTER_WRITE must be on or off, not {switch!r}"
                )
            snapshots = SWITCHES[switch]
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
            tool_prefix=prefix,
            snapshot_after_write=snapshots,
        )


def policy_hook(policy: ApprovalPolicy) -> ApproveHook:
    """The approval hook of an environment policy: `all` approves every write, others none."""

    def decide(request: WriteRequest) -> bool:
        return policy == "all"

    return decide


def _with_elements(hook: ApproveHook) -> ApproveHook:
    """`hook`, shown the `element` descriptions of the tool call that asks."""

    def decide(request: WriteRequest) -> bool | Awaitable[bool]:
        elements = _ELEMENTS.get()
        return hook(dataclasses.replace(request, elements=elements) if elements else request)

    return decide


@dataclass
class _Bound:
    """What the tool calls share: the tools, and the session once it could be created."""

    tools: dict[str, CatalogTool]
    policy: str
    names: ToolNames
    settings: McpSettings
    sleep: Callable[[float], Awaitable[None]]
    open_session: Callable[[], Awaitable[AsyncSession]]
    session: AsyncSession | None = None
    start_failure: str | None = None
    _lock: anyio.Lock = field(default_factory=anyio.Lock)

    async def start(self) -> AsyncSession | None:
        """The session, creating it if that failed before; None (and why) when it fails again."""
        async with self._lock:
            if self.session is None:
                try:
                    self.session = await self.open_session()
                except UnderstudyError as error:
                    self.start_failure = _start_failure(error, self.settings)
                    return None
                self.start_failure = None
            return self.session


def build_server(
    settings: McpSettings,
    *,
    approve: ApproveHook | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    sleep: Callable[[float], Awaitable[None]] | None = None,
) -> Server[_Bound]:
    """An MCP server exposing the catalog, bound to one session for its lifetime.

    The session is created when the server starts, while the agent initializes. When that fails,
    the server still serves and lists its tools; every call reports why, as a tool error, and
    tries to create it again.

    Args:
        settings: Where and how to create the session.
        approve: An approval hook for writes; by default the policy in `settings.approve`. It
            sees the agent's `element` descriptions in `WriteRequest.elements`.
        transport: An httpx transport for the Understudy API (tests pass a mock).
        sleep: How to wait between retries and for `wait_for` with `time` (tests pass a fake).
    """
    hook = _with_elements(approve or policy_hook(settings.approve))
    policy = "custom hook" if approve is not None else f"UNDERSTUDY_MCP_APPROVE={settings.approve}"
    names = ToolNames(settings.tool_prefix)
    visible = {
        tool.name: tool
        for tool in catalog_tools(
            settings.tool_prefix, snapshot_after_write=settings.snapshot_after_write
        )
        if settings.approve != "reads-only" or tool.kind == "read"
    }
    audit: AuditHook | None = _print_audit if settings.audit_to_stderr else None
    extra: dict[str, Any] = {} if sleep is None else {"sleep": sleep}

    @asynccontextmanager
    async def lifespan(server: Server[_Bound]) -> AsyncIterator[_Bound]:
        async with AsyncExitStack() as stack:
            client = await stack.enter_async_context(
                AsyncClient(
                    settings.url, settings.api_key, transport=transport, audit=audit, **extra
                )
            )

            async def open_session() -> AsyncSession:
                session = client.session(
                    settings.mode,
                    allowed_origins=list(settings.allowed_origins) or None,
                    profile_state_key=settings.profile_state_key,
                    device_id=settings.device_id,
                    approve=hook,
                )
                # Closed when the server stops, whichever call managed to open it.
                return await stack.enter_async_context(session)

            bound = _Bound(visible, policy, names, settings, sleep or anyio.sleep, open_session)

            async def start() -> None:
                if await bound.start() is None:
                    # stdout is the MCP channel; the operator reads stderr.
                    print(f"understudy-mcp: {bound.start_failure}", file=sys.stderr, flush=True)

            # The session is created while the agent initializes and lists the tools: waiting
            # for a device can take most of a minute, longer than a client waits for an answer
            # to `initialize`. A call that comes first waits for it. At shutdown the creation is
            # awaited, not cancelled, so a session created meanwhile is deleted, not left behind.
            async with anyio.create_task_group() as starting:
                starting.start_soon(start)
                yield bound

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
        instructions=instructions(names),
        lifespan=lifespan,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def run_tool(bound: _Bound, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    """Run one tool call against the bound session; every failure becomes an actionable text."""
    tool = bound.tools.get(name)
    if tool is None:
        command = name.removeprefix(bound.names.prefix)
        if name.startswith(bound.names.prefix) and COMMAND_KINDS.get(command) == "write":
            return failure(
                f"{name} is a write and writes are disabled ({bound.policy}); use read tools."
            )
        return failure(f"There is no tool named {name!r}; list the tools and pick one of them.")
    try:
        call = parse_arguments(tool, arguments)
    except UsageError as error:
        return failure(explain(error, name, bound.policy, bound.names))
    if call.pause is not None:
        await bound.sleep(call.pause)
        return types.CallToolResult(
            content=[types.TextContent(text=f"Waited {call.pause:g} s.")],
            structured_content={"waitedSeconds": call.pause},
        )
    session = await bound.start()
    if session is None:
        return failure(f"{name} cannot run: {bound.start_failure}")
    chosen = "format" in arguments or "changesSince" in arguments
    token = _ELEMENTS.set(call.elements)
    try:
        result = await _execute(session, call, format_chosen=chosen)
    except UnderstudyError as error:
        return failure(explain(error, name, bound.policy, bound.names))
    finally:
        _ELEMENTS.reset(token)
    answer = success(result)
    if tool.kind == "write" and not call.dry_run and bound.settings.snapshot_after_write:
        answer.content.append(await _page_after(bound, session))
    return answer


async def _execute(
    session: AsyncSession, call: ToolCall, *, format_chosen: bool
) -> models.CommandResult:
    command = call.command
    if command is None:
        raise UsageError("a pause has no command")  # run_tool answers pauses itself
    try:
        return await session.execute(command, dry_run=call.dry_run)
    except CommandFailed as failed:
        # The compact text was this server's choice, not the agent's: from an extension that
        # predates it, the nodes (rendered as text) are the next best answer.
        older = (
            build.predates_compact(command, failed)
            if not format_chosen and isinstance(command, models.SnapshotCommand)
            else None
        )
        if older is None:
            raise
        return await session.execute(older)


async def _page_after(bound: _Bound, session: AsyncSession) -> types.TextContent:
    """The page after a write, as the compact snapshot (or why there is none)."""
    snapshot = models.SnapshotCommand(name="snapshot", format=MCP_SNAPSHOT_FORMAT)
    try:
        page = await _execute(session, ToolCall(snapshot), format_chosen=False)
    except UnderstudyError as error:
        why = explain(error, bound.names.snapshot, bound.policy, bound.names)
        return types.TextContent(text=f"No snapshot after the write: {why}")
    (text,) = [block for block in success(page).content if isinstance(block, types.TextContent)]
    return types.TextContent(text=f"The page now:\n{text.text}")


def _start_failure(error: UnderstudyError, settings: McpSettings) -> str:
    """Why the session could not be created, and who can do what about it."""
    start = f"the browser session could not be created at {settings.url}"
    if isinstance(error, Unauthorized):
        return (
            f"{start}: the service refused the API key ({error}). UNDERSTUDY_API_KEY must hold a "
            "valid consumer key (usk_...); the operator must fix it and restart this MCP server."
        )
    if isinstance(error, BackendUnreachable):
        return (
            f"{start}: {error}. Check that the Understudy service is running and that "
            "UNDERSTUDY_URL is right; the next tool call tries again."
        )
    if isinstance(error, UsageError):
        return (
            f"{start}: {error}. The operator must fix the server's settings (understudy-mcp "
            "--help lists them) and restart it."
        )
    if isinstance(error, ProblemError):
        return f"{start}: the service refused it ({error}). The next tool call tries again."
    return f"{start}: {error}. The next tool call tries again."


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
        # The session could not be deleted: say so plainly instead of a traceback.
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
    # stdout is the MCP channel; audit goes to stderr. It stays content-free: the agent's
    # `element` descriptions can quote the page, so only the approval hook sees them.
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
    parser.add_argument(
        "--tool-prefix",
        help=f"put before each command name to make its tool name; '' for none (default "
        f"{DEFAULT_TOOL_PREFIX!r}; UNDERSTUDY_MCP_TOOL_PREFIX)",
    )
    parser.add_argument(
        "--snapshot-after-write",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="end each write's result with a compact snapshot of the page (default on; "
        "UNDERSTUDY_MCP_SNAPSHOT_AFTER_WRITE=on|off)",
    )
    return parser


if __name__ == "__main__":
    main()
