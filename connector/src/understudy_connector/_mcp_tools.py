"""The command catalog as MCP tools: schemas, annotations, results and actionable error texts.

Input schemas come from the generated command models (themselves generated from
spec/frames/commands.json), with `$ref`s inlined and the `null` branches pydantic adds for optional
fields removed: the wire refuses null, so the schema must too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, get_args

from mcp import types
from pydantic import ValidationError

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
    from understudy_connector.generated._wire import WireModel

DRY_RUN_SCHEMA: Final[dict[str, Any]] = {
    "type": "boolean",
    "default": False,
    "description": "Resolve the target and check the policy without acting; nothing changes.",
}

MCP_SNAPSHOT_FORMAT: Final = "compact"
"""A snapshot tool call without `format` gets the compact text: it is made for a model's context."""

ADVICE: Final[dict[str, str]] = {
    "invalid_arguments": "check the arguments against the tool's input schema and call again",
    "stale_ref": "the page changed since that snapshot: call snapshot and use a ref from it",
    "ref_not_found": "no element has that ref: call snapshot and pick a ref from it",
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
    "tab_not_owned": "only the session's own tab can be used: call get_tabs for its id",
    "tab_closed": "the session's tab was closed: the session must be restarted",
    "wait_timeout": (
        "the condition did not hold in time: call snapshot to check the page, or wait longer "
        "(timeoutMs)"
    ),
    "deadline_exceeded": (
        "the write stopped part-way to answer before its deadline (the error says how far it "
        "got): call snapshot to see the page, then send the rest or a faster form of it"
    ),
    "cdp_error": "the browser reported an error: call snapshot, then try again",
}


@dataclass(frozen=True)
class CatalogTool:
    """One catalog command exposed as an MCP tool."""

    name: str
    kind: Literal["read", "write"]
    model: type[WireModel]
    tool: types.Tool


def command_models() -> dict[str, type[WireModel]]:
    """The generated model of each catalog command, by command name."""
    union = get_args(models.Command.__value__)[0]
    found: dict[str, type[WireModel]] = {}
    for model in get_args(union):
        (name,) = get_args(model.model_fields["name"].annotation)
        found[name] = model
    return found


def catalog_tools() -> list[CatalogTool]:
    """Every catalog command as a tool, reads first, in catalog order."""
    tools = []
    for name, model in command_models().items():
        kind = COMMAND_KINDS[name]
        tools.append(CatalogTool(name, kind, model, _tool(name, kind, model)))
    return tools


def input_schema(model: type[WireModel], kind: Literal["read", "write"]) -> dict[str, Any]:
    """The JSON Schema of a command's arguments: the model's, without `name`, plus `dryRun`."""
    schema = model.model_json_schema(by_alias=True)
    defs = schema.pop("$defs", {})
    clean = _clean(_inline(schema, defs))
    properties = {key: value for key, value in clean["properties"].items() if key != "name"}
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
    required = [key for key in clean.get("required", []) if key != "name"]
    result: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        result["required"] = required
    return result


def parse_arguments(tool: CatalogTool, arguments: dict[str, Any]) -> tuple[models.Command, bool]:
    """The command and its `dryRun` flag from a tool call's arguments.

    Raises:
        UsageError: The arguments do not match the tool's schema.
    """
    values = dict(arguments)
    dry_run = values.pop("dryRun", False) if tool.kind == "write" else False
    if not isinstance(dry_run, bool):
        raise UsageError(f"invalid arguments for {tool.name}: dryRun must be true or false")
    if "name" in values:
        raise UsageError(f"invalid arguments for {tool.name}: unexpected argument 'name'")
    if tool.model is models.SnapshotCommand:
        values.setdefault("format", MCP_SNAPSHOT_FORMAT)
    try:
        command = tool.model.model_validate({**values, "name": tool.name})
    except ValidationError as exc:
        raise invalid_arguments(tool.name, exc) from None
    return command, dry_run  # type: ignore[return-value]  # each tool's model is a Command


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


def explain(error: UnderstudyError, command: str, policy: str) -> str:
    """What happened and what to do next, for an agent."""
    if isinstance(error, CommandOutcomeUnknown):
        return (
            f"Outcome UNKNOWN: {command} (command {error.command_id}) may or may not have taken "
            "effect. It was not retried and must not be repeated blindly. Next: call snapshot to "
            "see the page as it is now. Further writes in this session are blocked; to write "
            "again, the operator must restart this MCP server (a new session)."
        )
    if isinstance(error, WritesBlocked):
        why = error.detail or "an earlier outcome is unknown or the browser restarted"
        return (
            f"{command} was not sent: writes in this browser session are blocked ({why}). "
            "Nothing ran. Read tools still work: call snapshot to see the page. To write again, "
            "the operator must restart this MCP server (a new session)."
        )
    if isinstance(error, WriteRefused):
        return (
            f"{command} was refused by the approval policy ({policy}) and was not sent. Do not "
            "retry it; ask the user to approve this kind of action, or continue with read tools."
        )
    if isinstance(error, CommandFailed):
        advice = ADVICE.get(error.code, "call snapshot to see the page, then decide")
        return f"{command} failed ({error.code}): {error.message}. Next: {advice}."
    if isinstance(error, OutcomeTimeout):
        return (
            f"{command} (command {error.command_id}) is still pending after {error.timeout:g} s "
            "and may still complete. Do not repeat it; call snapshot in a few seconds to see "
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
            f"{command}: the Understudy service could not be reached. A write may have been "
            "admitted before the connection dropped: call snapshot before repeating it."
        )
    if isinstance(error, UsageError):
        return f"{error}. Fix the arguments and call again."
    if isinstance(error, ProblemError):
        return f"The service refused {command}: {error}. Do not repeat it unchanged."
    if isinstance(error, ResponseValidationError):
        return f"The service sent an answer this connector cannot read ({error}); call snapshot."
    return f"{command} failed: {error}"


def _tool(name: str, kind: Literal["read", "write"], model: type[WireModel]) -> types.Tool:
    summary = " ".join((model.__doc__ or name).split())
    if kind == "read":
        note = "Read: no side effect; safe to repeat."
    else:
        note = (
            "Write: runs at most once, after approval. If the outcome is unknown it is reported "
            "as such and never retried: check the page with snapshot instead of repeating it."
        )
    return types.Tool(
        name=name,
        title=name.replace("_", " ").capitalize(),
        description=f"{summary} {note}",
        input_schema=input_schema(model, kind),
        annotations=types.ToolAnnotations(
            title=name.replace("_", " ").capitalize(),
            read_only_hint=kind == "read",
            destructive_hint=kind == "write",
            idempotent_hint=kind == "read",
            open_world_hint=True,
        ),
    )


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
    node = {key: value for key, value in node.items() if key != "title"}
    options = node.get("anyOf")
    if isinstance(options, list):
        kept = [option for option in options if option != {"type": "null"}]
        if len(kept) != len(options):
            rest = {key: value for key, value in node.items() if key != "anyOf"}
            node = {**kept[0], **rest} if len(kept) == 1 else {**rest, "anyOf": kept}
    cleaned = {key: _clean(value) for key, value in node.items() if key != "properties"}
    if isinstance(node.get("properties"), dict):
        # Property names are data, not keywords: a property called "title" stays.
        cleaned["properties"] = {name: _clean(value) for name, value in node["properties"].items()}
    return cleaned
