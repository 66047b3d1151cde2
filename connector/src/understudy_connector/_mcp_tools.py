"""The command catalog as MCP tools: schemas, annotations, results and actionable error texts.

Input schemas come from the generated command models (themselves generated from
spec/frames/commands.json), with `$ref`s inlined and the `null` branches and `"default": null`s
pydantic adds for optional fields removed: the wire refuses null, so the schema must too (an
optional field is simply not required). Nothing here names a command except `snapshot` (its
compact default) and `wait_for` (flat arguments, see `_mcp_wait`): a command added to the catalog
becomes a tool by itself, with an `element` description beside each of its refs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, get_args

from mcp import types
from pydantic import ValidationError

from understudy_connector import _mcp_wait
from understudy_connector._commands import invalid_arguments
from understudy_connector._exceptions import (
    BackendUnreachable,
    CommandFailed,
    CommandNotStarted,
    CommandOutcomeUnknown,
    CommandTimedOut,
    OutcomeTimeout,
    ProblemError,
    ProtocolUpgradeRequired,
    RateLimited,
    ResponseValidationError,
    SessionBusy,
    SessionClosedError,
    SessionTerminal,
    SessionUnavailable,
    UnderstudyError,
    UsageError,
    WriteRefused,
    WritesBlocked,
)
from understudy_connector._snapshot import render_snapshot
from understudy_connector.generated import models
from understudy_connector.generated.catalog import COMMAND_KINDS

if TYPE_CHECKING:
    from collections.abc import Mapping

    from understudy_connector.generated._wire import WireModel

DEFAULT_TOOL_PREFIX: Final = "browser_"
"""Tool names are the catalog's with this prefix, as agents know them from Playwright MCP."""

REF_DEFINITION: Final = "#/$defs/Ref"
ELEMENT_SCHEMA: Final[dict[str, Any]] = {
    "type": "string",
    "minLength": 1,
    "maxLength": 500,
    "description": (
        "What the ref's element is, in a few words (like 'Sign in button'): shown for approval "
        "only, never audited nor sent to the browser."
    ),
}
REF_DESCRIPTION: Final = "The element's ref from the latest snapshot, like g2e14."

DRY_RUN_SCHEMA: Final[dict[str, Any]] = {
    "type": "boolean",
    "default": False,
    "description": "Resolve the target and check the policy without acting; nothing changes.",
}

MCP_SNAPSHOT_FORMAT: Final = "compact"
"""A snapshot tool call without `format` gets the compact text: it is made for a model's context."""

ADVICE: Final[dict[str, str]] = {
    "invalid_arguments": "check the arguments against the tool's input schema and call again",
    "stale_ref": "the page changed since that snapshot: call {snapshot} and use a ref from it",
    "ref_not_found": "no element has that ref: call {snapshot} and pick a ref from it",
    "element_not_interactable": (
        "the element is hidden, disabled or covered: scroll it into view or pick another element"
    ),
    "element_obscured": (
        "another element (the error names it) is on top of the target: close or dismiss it, "
        "scroll, or pick another element"
    ),
    "origin_not_allowed": (
        "that origin is outside the session's allowed origins: stay within them, or ask the "
        "operator to start a session that allows it"
    ),
    "navigation_failed": "the page did not load: check the URL, then try again",
    "secret_not_found": "the vault has no secret of that name: check secretRef (vault:<name>)",
    "no_history": "there is no history entry in that direction",
    "tab_not_owned": "only the session's own tab can be used: call {get_tabs} for its id",
    "tab_closed": "the session's tab was closed: the session must be restarted",
    "wait_timeout": (
        "the condition did not hold in time: call {snapshot} to check the page, or wait longer "
        "(timeoutMs)"
    ),
    "deadline_exceeded": (
        "the write stopped part-way to answer before its deadline (the error says how far it "
        "got): call {snapshot} to see the page, then send the rest or a faster form of it"
    ),
    "cdp_error": "the browser reported an error: call {snapshot}, then try again",
}
"""What to do next after each command error code; `{snapshot}` and `{get_tabs}` are tool names."""


HINTS: Final[dict[str, str]] = {
    "snapshot": (
        "Start here: the compact text (the default) lists one element per line with its ref in "
        "brackets; better than a screenshot for finding what to act on."
    ),
    "screenshot": "Refs cannot be read from an image: use {snapshot} to find what to act on.",
}
"""A sentence for an agent after the catalog's own summary of a few commands."""


@dataclass(frozen=True)
class CatalogTool:
    """One catalog command exposed as an MCP tool.

    Attributes:
        name: The tool name: the command's, with the server's prefix.
        command: The catalog command name.
        kind: `read` or `write`.
        model: The generated model of the command.
        tool: The MCP tool as listed.
        described: Each `element`-like description argument, with the ref argument it describes.
    """

    name: str
    command: str
    kind: Literal["read", "write"]
    model: type[WireModel]
    tool: types.Tool
    described: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolCall:
    """What a tool call asks for, its arguments checked.

    Attributes:
        command: The catalog command to run; None for a plain pause (`wait_for` with `time`).
        dry_run: The write's `dryRun` flag.
        elements: The agent's description of each ref argument's element, by ref argument
            (`{"ref": "Sign in button"}`); never part of the command.
        pause: Seconds to wait instead of running a command.
    """

    command: models.Command | None
    dry_run: bool = False
    elements: Mapping[str, str] = field(default_factory=dict)
    pause: float | None = None


@dataclass(frozen=True)
class ToolNames:
    """The names the texts for an agent use, with the server's prefix."""

    prefix: str = DEFAULT_TOOL_PREFIX

    def __call__(self, command: str) -> str:
        """The tool name of a catalog command."""
        return f"{self.prefix}{command}"

    @property
    def snapshot(self) -> str:
        """The snapshot tool's name."""
        return self("snapshot")


def command_models() -> dict[str, type[WireModel]]:
    """The generated model of each catalog command, by command name."""
    union = get_args(models.Command.__value__)[0]
    found: dict[str, type[WireModel]] = {}
    for model in get_args(union):
        (name,) = get_args(model.model_fields["name"].annotation)
        found[name] = model
    return found


def catalog_tools(
    prefix: str = DEFAULT_TOOL_PREFIX, *, snapshot_after_write: bool = False
) -> list[CatalogTool]:
    """Every catalog command as a tool, reads first, in catalog order.

    Args:
        prefix: Put before each command name to make the tool name.
        snapshot_after_write: Whether write results end with a snapshot (said in descriptions).
    """
    names = ToolNames(prefix)
    tools = []
    for command, model in command_models().items():
        kind = COMMAND_KINDS[command]
        schema, described = input_schema(model, kind)
        tool = _tool(names, command, kind, model, schema, snapshot_after_write)
        tools.append(CatalogTool(names(command), command, kind, model, tool, described))
    return tools


def description_argument(ref_argument: str) -> str:
    """The name of the description argument beside a ref argument: `ref` -> `element`.

    `fromRef` -> `fromElement`, as Playwright MCP pairs `startRef` with `startElement`.
    """
    if ref_argument == "ref":
        return "element"
    stem = ref_argument.removesuffix("Ref")
    return f"{stem}Element"


def input_schema(
    model: type[WireModel], kind: Literal["read", "write"]
) -> tuple[dict[str, Any], dict[str, str]]:
    """The JSON Schema of a command's arguments, and its description arguments.

    The model's schema without `name`, plus `dryRun` for writes and an optional description
    argument before each ref argument (returned as description argument -> ref argument).
    """
    schema = model.model_json_schema(by_alias=True)
    defs = schema.pop("$defs", {})
    refs = [key for key, value in schema["properties"].items() if _is_ref(value)]
    clean = _clean(_inline(schema, defs))
    required = [key for key in clean.get("required", []) if key != "name"]
    described: dict[str, str] = {}
    properties: dict[str, Any] = {}
    for key, value in clean["properties"].items():
        if key == "name":
            continue
        if key in refs:
            described[description_argument(key)] = key
            properties[description_argument(key)] = ELEMENT_SCHEMA
            value = {"description": REF_DESCRIPTION, **value}
        properties[key] = value
    if model is models.WaitForCommand:
        flat = _mcp_wait.flat_properties(
            clean["properties"]["condition"], clean["properties"].get("timeoutMs")
        )
        properties = {}
        for key, value in flat.items():
            if key == "ref":
                properties["element"] = ELEMENT_SCHEMA
                described["element"] = "ref"
            properties[key] = value
        required = []
    if kind == "write":
        properties["dryRun"] = DRY_RUN_SCHEMA
    if "format" in properties and model is models.SnapshotCommand:
        properties["format"] = {
            **properties["format"],
            "default": MCP_SNAPSHOT_FORMAT,
            "description": (
                "compact (the default here): one line per element, refs in brackets, links as "
                "[text](ref). nodes: the structured tree as JSON. both: both."
            ),
        }
    result: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        result["required"] = required
    return result, described


def parse_arguments(tool: CatalogTool, arguments: Mapping[str, Any]) -> ToolCall:
    """What a tool call's arguments ask for.

    Raises:
        UsageError: The arguments do not match the tool's schema.
    """
    values = dict(arguments)
    dry_run = values.pop("dryRun", False) if tool.kind == "write" else False
    if not isinstance(dry_run, bool):
        raise UsageError(f"invalid arguments for {tool.name}: dryRun must be true or false")
    if "name" in values:
        raise UsageError(f"invalid arguments for {tool.name}: unexpected argument 'name'")
    elements: dict[str, str] = {}
    for argument, ref in tool.described.items():
        if argument not in values:
            continue
        description = values.pop(argument)
        if not isinstance(description, str) or not description.strip():
            raise UsageError(f"invalid arguments for {tool.name}: {argument} must be a text")
        if ref not in values:
            raise UsageError(f"invalid arguments for {tool.name}: {argument} goes with {ref}")
        elements[ref] = " ".join(description.split())[: ELEMENT_SCHEMA["maxLength"]]
    if tool.model is models.SnapshotCommand:
        values.setdefault("format", MCP_SNAPSHOT_FORMAT)
    if tool.model is models.WaitForCommand:
        timeout = tool.tool.input_schema["properties"].get("timeoutMs", {})
        wanted, pause = _mcp_wait.to_command(
            tool.name, values, timeout.get("maximum", 15000) / 1000
        )
        if wanted is None:
            return ToolCall(None, elements=elements, pause=pause)
        values = wanted
    try:
        command = tool.model.model_validate({**values, "name": tool.command})
    except ValidationError as exc:
        raise invalid_arguments(tool.name, exc) from None
    return ToolCall(command, dry_run, elements)  # type: ignore[arg-type]  # a tool's model is a Command


def success(result: models.CommandResult) -> types.CallToolResult:
    """The tool result of a succeeded command: readable text plus the structured result."""
    structured = result.to_wire()
    content: list[types.ContentBlock]
    if isinstance(result, models.SnapshotResult):
        structured.pop("text", None)  # the text travels once, as text content
        content = [types.TextContent(text=render_snapshot(result))]
    elif isinstance(result, models.ScreenshotResult):
        structured.pop("data")  # the image itself travels once, as image content
        content = [
            types.ImageContent(data=result.data, mime_type=result.mime_type),
            types.TextContent(text=f"Screenshot {result.width}x{result.height} {result.mime_type}"),
        ]
    elif isinstance(result, models.WriteResult):
        content = [types.TextContent(text=_describe_write(result))]
    else:
        content = [types.TextContent(text=json.dumps(structured, indent=1))]
    return types.CallToolResult(content=content, structured_content=structured)


def failure(text: str) -> types.CallToolResult:
    """An error result the agent can read and act on."""
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


def explain(
    error: UnderstudyError, command: str, policy: str, names: ToolNames | None = None
) -> str:
    """What happened and what to do next, for an agent (`command` is the tool's name)."""
    snapshot = (names or ToolNames()).snapshot
    if isinstance(error, CommandOutcomeUnknown):
        return (
            f"Outcome UNKNOWN: {command} (command {error.command_id}) may or may not have taken "
            f"effect. It was not retried and must not be repeated blindly. Next: call {snapshot} "
            "to see the page as it is now. Further writes in this session are blocked; to write "
            "again, the operator must restart this MCP server (a new session)."
        )
    if isinstance(error, WritesBlocked):
        why = error.detail or "an earlier outcome is unknown or the browser restarted"
        return (
            f"{command} was not sent: writes in this browser session are blocked ({why}). "
            f"Nothing ran. Read tools still work: call {snapshot} to see the page. To write "
            "again, the operator must restart this MCP server (a new session)."
        )
    if isinstance(error, WriteRefused):
        return (
            f"{command} was refused by the approval policy ({policy}) and was not sent. Do not "
            "retry it; ask the user to approve this kind of action, or continue with read tools."
        )
    if isinstance(error, CommandFailed):
        names = names or ToolNames()
        advice = ADVICE.get(error.code, "call {snapshot} to see the page, then decide")
        advice = advice.format(snapshot=snapshot, get_tabs=names("get_tabs"))
        return f"{command} failed ({error.code}): {error.message}. Next: {advice}."
    if isinstance(error, OutcomeTimeout):
        return (
            f"{command} (command {error.command_id}) is still pending after {error.timeout:g} s "
            f"and may still complete. Do not repeat it; call {snapshot} in a few seconds to see "
            "whether it took effect."
        )
    if isinstance(error, SessionTerminal | SessionClosedError):
        return (
            "The browser session has ended (closed, expired or its device was lost). The "
            "operator must restart this MCP server to get a new session."
        )
    if isinstance(error, ProtocolUpgradeRequired):
        return (
            f"{command} cannot run: the browser extension lacks the safe-write protocol. Ask the "
            "operator to update the extension; read tools still work."
        )
    if isinstance(error, SessionBusy | RateLimited):
        wait = f"{error.retry_after:g} s" if error.retry_after is not None else "a moment"
        return (
            f"{command} was not admitted ({error.code}); nothing ran. Wait {wait}, then call it "
            "again."
        )
    if isinstance(error, SessionUnavailable):
        return (
            f"{command} was not admitted: the browser tab is not connected right now (the device "
            "may be offline, recovering, or an attended tab is not attached yet); nothing ran. "
            "Try again shortly."
        )
    if isinstance(error, CommandNotStarted | CommandTimedOut):
        return (
            f"{command} did not complete ({error.code}); nothing ran. It is safe to call it again."
        )
    if isinstance(error, BackendUnreachable):
        return (
            f"{command}: the Understudy service could not be reached ({error}). A write may have "
            f"been admitted before the connection dropped: call {snapshot} before repeating it."
        )
    if isinstance(error, UsageError):
        return f"{error}. Fix the arguments and call again."
    if isinstance(error, ProblemError):
        return f"The service refused {command}: {error}. Do not repeat it unchanged."
    if isinstance(error, ResponseValidationError):
        return f"The service sent an answer this connector cannot read ({error}); call {snapshot}."
    return f"{command} failed: {error}"


def _tool(
    names: ToolNames,
    command: str,
    kind: Literal["read", "write"],
    model: type[WireModel],
    schema: dict[str, Any],
    snapshot_after_write: bool,
) -> types.Tool:
    summary = " ".join((model.__doc__ or command).split())
    if model is models.WaitForCommand:
        summary = (
            "Wait until a text appears (text) or is gone (textGone), the URL contains a text "
            "(url), an element reaches a state (ref and state), or only for a number of seconds "
            "(time). Pass exactly one of them."
        )
    hint = HINTS.get(command)
    if hint is not None:
        summary = f"{summary} {hint.format(snapshot=names.snapshot)}"
    if kind == "read":
        note = "Read: no side effect; safe to repeat."
    else:
        after = " Answers with a fresh snapshot of the page." if snapshot_after_write else ""
        note = (
            "Write: approved first, runs at most once; dryRun previews it. An unknown outcome is "
            f"reported, never retried: check with {names.snapshot} instead of repeating it."
            f"{after}"
        )
    title = command.replace("_", " ").capitalize()
    return types.Tool(
        name=names(command),
        title=title,
        description=f"{summary} {note}",
        input_schema=schema,
        annotations=types.ToolAnnotations(
            title=title,
            read_only_hint=kind == "read",
            destructive_hint=kind == "write",
            idempotent_hint=kind == "read",
            open_world_hint=True,
        ),
    )


def _is_ref(schema: dict[str, Any]) -> bool:
    """Whether a property of a model's schema (before inlining) is an element ref."""
    options = schema.get("anyOf", [schema])
    return any(option.get("$ref") == REF_DEFINITION for option in options)


def _describe_write(result: models.WriteResult) -> str:
    if result.preview is not None:
        preview = result.preview
        target = " ".join(part for part in (preview.target_role, preview.target_name) if part)
        parts = [f"Dry run of {result.name}: nothing changed."]
        if target:
            parts.append(f"It would act on: {target}.")
        if preview.navigates_to:
            method = f" ({preview.method})" if preview.method else ""
            parts.append(f"It would navigate to {preview.navigates_to}{method}.")
        if preview.opens_popup:
            parts.append("It would open a popup (another window or tab).")
        parts.append("The policy allows it." if preview.allowed else "The policy refuses it.")
        return " ".join(parts)
    return (
        f"{result.name} done. The tab shows {result.title!r} at {result.url} "
        f"(document generation {result.generation}; refs of older snapshots may be stale)."
    )


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        reference = node.get("$ref")
        if isinstance(reference, str) and reference.startswith("#/$defs/"):
            target = _inline(defs[reference.removeprefix("#/$defs/")], defs)
            rest = {key: value for key, value in node.items() if key != "$ref"}
            return {**target, **_inline(rest, defs)}
        return {key: _inline(value, defs) for key, value in node.items()}
    if isinstance(node, list):
        return [_inline(item, defs) for item in node]
    return node


def _clean(node: Any) -> Any:
    if isinstance(node, list):
        return [_clean(item) for item in node]
    if not isinstance(node, dict):
        return node
    options = node.get("anyOf")
    if isinstance(options, list):
        kept = [option for option in options if option != {"type": "null"}]
        if len(kept) != len(options):
            rest = {key: value for key, value in node.items() if key != "anyOf"}
            node = {**kept[0], **rest} if len(kept) == 1 else {**rest, "anyOf": kept}
    # After the null branch is gone: its `title` and a `"default": null` would describe a null
    # the wire refuses (an optional field is simply not required).
    node = {
        key: value
        for key, value in node.items()
        if key != "title" and not (key == "default" and value is None)
    }
    cleaned = {key: _clean(value) for key, value in node.items() if key != "properties"}
    if isinstance(node.get("properties"), dict):
        # Property names are data, not keywords: a property called "title" stays.
        cleaned["properties"] = {name: _clean(value) for name, value in node["properties"].items()}
    return cleaned
