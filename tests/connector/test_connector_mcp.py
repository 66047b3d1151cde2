"""understudy-mcp in-process, over the SDK's in-memory transport, against the scripted backend."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import jsonschema
import pytest
from mcp import Client, types
from pydantic import Field

from understudy_connector import UsageError, WriteRequest, _mcp_wait
from understudy_connector._mcp_tools import (
    ADVICE,
    catalog_tools,
    command_models,
    description_argument,
    input_schema,
    parse_arguments,
)
from understudy_connector.generated import models
from understudy_connector.generated._wire import WireModel
from understudy_connector.generated.catalog import COMMAND_KINDS, READ_COMMANDS
from understudy_connector.mcp_server import McpSettings, build_server

from .scripted import (
    API_KEY,
    BASE_URL,
    LOGIN_SNAPSHOT,
    SESSION_ID,
    FakeClock,
    ScriptedBackend,
    Step,
    outcome,
    problem,
    result_for,
    session,
    tombstone,
)

CREATE = ("POST", "/v1/sessions")
SUBMIT = ("POST", f"/v1/sessions/{SESSION_ID}/commands")
DELETE = ("DELETE", f"/v1/sessions/{SESSION_ID}")
CATALOG = json.loads((Path(__file__).parents[2] / "spec" / "frames" / "commands.json").read_text())[
    "$defs"
]


def settings(**changes: Any) -> McpSettings:
    values: dict[str, Any] = {
        "url": BASE_URL,
        "api_key": API_KEY,
        "allowed_origins": ("https://example.com",),
        "profile_state_key": "crm-bot-profile",
        "approve": "all",
        # Most tests here are about one exchange each; the snapshot after a write has its own.
        "snapshot_after_write": False,
    }
    return McpSettings(**(values | changes))


async def run(
    clock: FakeClock, steps: list[Step], calls: list[tuple[str, dict[str, Any]]], **options: Any
) -> tuple[types.ListToolsResult, list[types.CallToolResult], ScriptedBackend]:
    backend = ScriptedBackend(steps)
    approve = options.pop("approve_hook", None)
    server = build_server(
        settings(**options), approve=approve, transport=backend.transport(), sleep=clock.async_sleep
    )
    async with Client(server, mode="legacy") as client:
        listed = await client.list_tools()
        results = [await client.call_tool(name, arguments) for name, arguments in calls]
    return listed, results, backend


def text(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def test_the_session_lives_as_long_as_the_server(clock: FakeClock) -> None:
    _, _, backend = await run(clock, [session(201), tombstone()], [])
    assert backend.calls == [CREATE, DELETE]
    assert backend.requests[0].body == {
        "mode": "unattended",
        "allowedOrigins": ["https://example.com"],
        "profileStateKey": "crm-bot-profile",
    }


async def test_every_catalog_command_is_a_tool_with_its_kind_annotated(clock: FakeClock) -> None:
    listed, _, _ = await run(clock, [session(201), tombstone()], [])
    tools = {tool.name.removeprefix("browser_"): tool for tool in listed.tools}
    assert {tool.name for tool in listed.tools} == {f"browser_{name}" for name in COMMAND_KINDS}
    for name, tool in tools.items():
        assert tool.annotations is not None
        read = name in READ_COMMANDS
        assert tool.annotations.read_only_hint is read, name
        assert tool.annotations.destructive_hint is (not read), name
        assert ("dryRun" in tool.input_schema["properties"]) is (not read), name
        assert tool.description


def spec_of(name: str) -> dict[str, Any]:
    return next(
        definition
        for definition in CATALOG.values()
        if definition.get("properties", {}).get("name", {}).get("const") == name
    )


@pytest.mark.parametrize("name", sorted(set(COMMAND_KINDS) - {"wait_for"}))
def test_each_input_schema_is_the_catalog_schema(name: str) -> None:
    tool = next(tool for tool in catalog_tools() if tool.command == name).tool
    schema = tool.input_schema
    spec = spec_of(name)
    wanted = set(spec["properties"]) - {"name"}
    refs = {key for key, value in spec["properties"].items() if value == {"$ref": "#/$defs/Ref"}}
    described = {description_argument(ref) for ref in refs}
    assert set(schema["properties"]) - {"dryRun"} == wanted | described
    assert set(schema.get("required", [])) == set(spec["required"]) - {"name"}
    assert schema["additionalProperties"] is False
    validator = jsonschema.Draft202012Validator(schema)
    for example in spec["examples"]:
        arguments = {key: value for key, value in example.items() if key != "name"}
        validator.validate(arguments)
        validator.validate(arguments | dict.fromkeys(described, "the Sign in button"))
        for optional in wanted - set(spec["required"]):
            assert not validator.is_valid(arguments | {optional: None}), f"{name}.{optional}: null"
        if "ref" in wanted:
            assert not validator.is_valid(arguments | {"ref": "button-3"}), "the ref pattern"


def null_defaults(node: Any, path: str = "") -> list[str]:
    """Where a schema declares `"default": null` (or a `null` type) anywhere inside it."""
    found: list[str] = []
    if isinstance(node, dict):
        if "default" in node and node["default"] is None:
            found.append(f"{path}.default")
        if node.get("type") == "null" or "null" in (node.get("type") or []):
            found.append(f"{path}.type")
        for key, value in node.items():
            found += null_defaults(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += null_defaults(value, f"{path}[{index}]")
    return found


async def test_no_tool_schema_declares_a_null_default(clock: FakeClock) -> None:
    listed, _, _ = await run(clock, [session(201), tombstone()], [])
    assert len(listed.tools) == len(COMMAND_KINDS)
    for tool in listed.tools:
        jsonschema.Draft202012Validator.check_schema(tool.input_schema)
        assert null_defaults(tool.input_schema) == [], tool.name
        for key, value in tool.input_schema["properties"].items():
            if "default" in value:
                # A default the agent sees must itself be a valid value of the property.
                assert jsonschema.Draft202012Validator(value).is_valid(value["default"]), key


def test_the_null_check_sees_a_null_default() -> None:
    assert null_defaults({"properties": {"a": {"type": "string", "default": None}}}) == [
        ".properties.a.default"
    ]


def test_the_tool_models_are_the_catalog() -> None:
    assert set(command_models()) == set(COMMAND_KINDS)


async def test_a_read_tool_runs_and_returns_the_snapshot(clock: FakeClock) -> None:
    _, (result,), backend = await run(
        clock,
        [session(201), outcome("snapshot"), tombstone()],
        [("browser_snapshot", {"interactiveOnly": True})],
    )
    assert not result.is_error
    assert "- textbox 'Username' [ref=g2e5]" in text(result)
    assert result.structured_content is not None
    assert result.structured_content["generation"] == 2
    assert backend.calls == [CREATE, SUBMIT, DELETE]
    assert backend.requests[1].body["command"] == {
        "name": "snapshot",
        "interactiveOnly": True,
        "maxNodes": 1000,
        "format": "compact",
    }


COMPACT_TEXT = (
    "# Sign in — https://example.com/login (g2s1)\n"
    'textbox "Username" [g2e5]\ntextbox "Password" password [g2e6]\nbutton "Sign in" [g2e7]'
)


async def test_the_snapshot_tool_returns_the_compact_text_once(clock: FakeClock) -> None:
    compact = {**LOGIN_SNAPSHOT, "nodes": [], "snapshotId": "g2s1", "text": COMPACT_TEXT}
    _, (result, asked), backend = await run(
        clock,
        [session(201), outcome("snapshot", result=compact), outcome("snapshot"), tombstone()],
        [
            ("browser_snapshot", {}),
            ("browser_snapshot", {"format": "nodes", "changesSince": "g2s1"}),
        ],
    )
    assert text(result) == COMPACT_TEXT
    assert result.structured_content is not None
    assert "text" not in result.structured_content
    assert result.structured_content["snapshotId"] == "g2s1"
    assert backend.requests[1].body["command"]["format"] == "compact"
    # A model may still ask for the structured tree, and for changes since a snapshot.
    assert backend.requests[2].body["command"]["format"] == "nodes"
    assert backend.requests[2].body["command"]["changesSince"] == "g2s1"
    assert not asked.is_error


async def test_the_snapshot_tool_falls_back_to_nodes_on_an_older_extension(
    clock: FakeClock,
) -> None:
    older = ("invalid_arguments", "snapshot.format: unknown field")
    _, (result,), backend = await run(
        clock,
        [session(201), outcome("snapshot", status="failed", error=older), outcome("snapshot"),
         tombstone()],
        [("browser_snapshot", {})],
    )  # fmt: skip
    assert not result.is_error
    assert "- textbox 'Username' [ref=g2e5]" in text(result)
    assert "format" not in backend.requests[2].body["command"]


async def test_a_format_the_agent_chose_is_not_dropped(clock: FakeClock) -> None:
    older = ("invalid_arguments", "snapshot.format: unknown field")
    _, (result,), backend = await run(
        clock,
        [session(201), outcome("snapshot", status="failed", error=older), tombstone()],
        [("browser_snapshot", {"format": "compact"})],
    )
    assert result.is_error
    assert "invalid_arguments" in text(result)
    assert backend.calls == [CREATE, SUBMIT, DELETE], "asked once, not again without format"


def test_the_snapshot_tool_says_compact_is_its_default() -> None:
    (tool,) = [t for t in catalog_tools() if t.name == "browser_snapshot"]
    schema = tool.tool.input_schema["properties"]
    assert schema["format"]["default"] == "compact"
    assert schema["format"]["enum"] == ["nodes", "compact", "both"]
    assert schema["changesSince"]["pattern"] == "^g[0-9]{1,9}s[0-9]{1,9}$"


async def test_a_write_tool_runs_once_approved(clock: FakeClock) -> None:
    _, (result,), backend = await run(
        clock, [session(201), outcome("click"), tombstone()], [("browser_click", {"ref": "g2e7"})]
    )
    assert not result.is_error, text(result)
    assert "click done" in text(result)
    assert backend.calls == [CREATE, SUBMIT, DELETE]
    assert backend.requests[1].body["command"]["ref"] == "g2e7"
    assert backend.requests[1].body["dryRun"] is False


async def test_writes_are_refused_under_the_default_policy(clock: FakeClock) -> None:
    _, (result,), backend = await run(
        clock, [session(201), tombstone()], [("browser_click", {"ref": "g2e7"})], approve="none"
    )
    assert result.is_error
    assert "refused" in text(result)
    assert "UNDERSTUDY_MCP_APPROVE=none" in text(result)
    assert backend.calls == [CREATE, DELETE]


async def test_a_dry_run_needs_no_approval(clock: FakeClock) -> None:
    preview = result_for("click", targetRole="button", targetName="Sign in", allowed=True)
    _, (result,), backend = await run(
        clock,
        [session(201), outcome("click", result=preview), tombstone()],
        [("browser_click", {"ref": "g2e7", "dryRun": True})],
        approve="none",
    )
    assert not result.is_error, text(result)
    assert "Dry run of click: nothing changed. It would act on: button Sign in." in text(result)
    assert backend.requests[1].body["dryRun"] is True


async def test_a_dry_run_says_where_a_click_would_navigate(clock: FakeClock) -> None:
    preview = result_for(
        "click",
        targetRole="link",
        targetName="Help",
        navigatesTo="https://help.example.net/",
        method="GET",
        allowed=False,
        opensPopup=True,
    )
    _, (result,), _ = await run(
        clock,
        [session(201), outcome("click", result=preview), tombstone()],
        [("browser_click", {"ref": "g2e7", "dryRun": True})],
        approve="none",
    )
    assert not result.is_error, text(result)
    assert text(result) == (
        "Dry run of click: nothing changed. It would act on: link Help. It would navigate to "
        "https://help.example.net/ (GET). It would open a popup (another window or tab). "
        "The policy refuses it."
    )


async def test_reads_only_hides_and_refuses_write_tools(clock: FakeClock) -> None:
    listed, (result,), backend = await run(
        clock,
        [session(201), tombstone()],
        [("browser_navigate", {"url": "https://example.com"})],
        approve="reads-only",
    )
    assert {tool.name for tool in listed.tools} == {f"browser_{name}" for name in READ_COMMANDS}
    assert result.is_error
    assert "writes are disabled" in text(result)
    assert backend.calls == [CREATE, DELETE]


async def test_writes_go_through_a_custom_approval_hook(clock: FakeClock) -> None:
    seen: list[WriteRequest] = []

    def approve(request: WriteRequest) -> bool:
        seen.append(request)
        return request.name == "fill"

    _, (filled, clicked), backend = await run(
        clock,
        [session(201), outcome("fill"), tombstone()],
        [("browser_fill", {"ref": "g2e5", "value": "jane"}), ("browser_click", {"ref": "g2e7"})],
        approve_hook=approve,
    )
    assert not filled.is_error
    assert clicked.is_error
    assert "custom hook" in text(clicked)
    assert [request.name for request in seen] == ["fill", "click"]
    assert backend.calls == [CREATE, SUBMIT, DELETE]


async def test_an_unknown_outcome_is_reported_as_such_and_never_retried(clock: FakeClock) -> None:
    _, (result,), backend = await run(
        clock,
        [session(201), problem(409, "command_outcome_unknown"), tombstone()],
        [("browser_click", {"ref": "g2e7"})],
    )
    assert result.is_error
    assert "Outcome UNKNOWN" in text(result)
    assert "not retried" in text(result)
    assert backend.requests[1].command_id in text(result)
    assert backend.calls == [CREATE, SUBMIT, DELETE]


async def test_blocked_writes_say_that_reads_still_work(clock: FakeClock) -> None:
    _, (result,), backend = await run(
        clock,
        [session(201), problem(409, "writes_blocked"), tombstone()],
        [("browser_click", {"ref": "g2e7"})],
    )
    assert result.is_error
    assert text(result).startswith(
        "browser_click was not sent: writes in this browser session are blocked"
    )
    assert "Read tools still work" in text(result)
    assert backend.calls == [CREATE, SUBMIT, DELETE], "refused once, never retried"


async def test_a_failed_command_says_what_to_do_next(clock: FakeClock) -> None:
    _, (result,), _ = await run(
        clock,
        [
            session(201),
            outcome("click", status="failed", error=("stale_ref", "old ref")),
            tombstone(),
        ],
        [("browser_click", {"ref": "g2e7"})],
    )
    assert result.is_error
    assert "click failed (stale_ref)" in text(result)
    assert "call browser_snapshot and use a ref from it" in text(result)


async def test_invalid_arguments_are_refused_before_sending(clock: FakeClock) -> None:
    _, results, backend = await run(
        clock,
        [session(201), tombstone()],
        [
            ("browser_click", {"ref": "button-3"}),
            ("browser_click", {}),
            ("browser_click", {"ref": "g2e7", "dryRun": "y"}),
        ],
    )
    assert all(result.is_error for result in results)
    assert all("call again" in text(result) for result in results)
    assert "ref" in text(results[0])
    assert backend.calls == [CREATE, DELETE]


async def test_a_screenshot_is_returned_as_an_image(clock: FakeClock) -> None:
    _, (result,), _ = await run(
        clock, [session(201), outcome("screenshot"), tombstone()], [("browser_screenshot", {})]
    )
    (image,) = [block for block in result.content if isinstance(block, types.ImageContent)]
    assert image.mime_type == "image/png"
    assert image.data == "iVBORw0KGgo="
    assert result.structured_content is not None
    assert "data" not in result.structured_content


def test_every_command_error_code_has_advice() -> None:
    codes = get_args(get_args(models.CommandErrorCode.__value__)[0])
    assert set(ADVICE) == set(codes)


def test_settings_come_from_the_environment_and_options() -> None:
    env = {
        "UNDERSTUDY_URL": "http://127.0.0.1:8787",
        "UNDERSTUDY_API_KEY": "usk_x",
        "UNDERSTUDY_ALLOWED_ORIGINS": "https://a.example, https://b.example",
        "UNDERSTUDY_PROFILE_KEY": "crm",
        "UNDERSTUDY_MCP_APPROVE": "all",
        "UNDERSTUDY_MCP_AUDIT": "stderr",
    }
    loaded = McpSettings.load([], env)
    assert loaded.allowed_origins == ("https://a.example", "https://b.example")
    assert (loaded.approve, loaded.audit_to_stderr, loaded.mode) == ("all", True, "unattended")
    assert "usk_x" not in repr(loaded)
    overridden = McpSettings.load(
        ["--approve", "reads-only", "--allowed-origin", "https://c.example"], env
    )
    assert overridden.approve == "reads-only"
    assert overridden.allowed_origins == ("https://c.example",)


@pytest.mark.parametrize(
    "env",
    [
        {"UNDERSTUDY_API_KEY": "usk_x"},
        {"UNDERSTUDY_URL": "http://127.0.0.1:8787"},
        {"UNDERSTUDY_URL": "http://x", "UNDERSTUDY_API_KEY": "k", "UNDERSTUDY_MCP_APPROVE": "yes"},
        {"UNDERSTUDY_URL": "http://x", "UNDERSTUDY_API_KEY": "k", "UNDERSTUDY_MODE": "robot"},
    ],
)
def test_bad_settings_are_refused_with_a_message(env: dict[str, str]) -> None:
    with pytest.raises(UsageError):
        McpSettings.load([], env)


def test_the_api_key_is_never_an_option() -> None:
    with pytest.raises(SystemExit):
        McpSettings.load(["--api-key", "usk_x"], {"UNDERSTUDY_URL": "http://x"})


def test_the_console_script_explains_missing_settings(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from understudy_connector.mcp_server import main

    monkeypatch.delenv("UNDERSTUDY_URL", raising=False)
    monkeypatch.setenv("UNDERSTUDY_API_KEY", "usk_x")
    with pytest.raises(SystemExit) as caught:
        main([])
    assert caught.value.code == 2
    assert "UNDERSTUDY_URL" in capsys.readouterr().err


def test_the_tool_prefix_and_the_snapshot_after_writes_are_settings() -> None:
    env = {"UNDERSTUDY_URL": "http://127.0.0.1:8787", "UNDERSTUDY_API_KEY": "usk_x"}
    default = McpSettings.load([], env)
    assert (default.tool_prefix, default.snapshot_after_write) == ("browser_", True)
    chosen = env | {"UNDERSTUDY_MCP_TOOL_PREFIX": "", "UNDERSTUDY_MCP_SNAPSHOT_AFTER_WRITE": "off"}
    loaded = McpSettings.load([], chosen)
    assert (loaded.tool_prefix, loaded.snapshot_after_write) == ("", False)
    overridden = McpSettings.load(["--tool-prefix", "web.", "--snapshot-after-write"], chosen)
    assert (overridden.tool_prefix, overridden.snapshot_after_write) == ("web.", True)
    assert not McpSettings.load(["--no-snapshot-after-write"], env).snapshot_after_write


@pytest.mark.parametrize(
    "env",
    [
        {"UNDERSTUDY_MCP_TOOL_PREFIX": "browser tools "},
        {"UNDERSTUDY_MCP_TOOL_PREFIX": "x" * 41},
        {"UNDERSTUDY_MCP_SNAPSHOT_AFTER_WRITE": "sometimes"},
    ],
)
def test_a_bad_prefix_or_switch_is_refused_with_a_message(env: dict[str, str]) -> None:
    base = {"UNDERSTUDY_URL": "http://x", "UNDERSTUDY_API_KEY": "k"}
    with pytest.raises(UsageError, match="UNDERSTUDY_MCP_"):
        McpSettings.load([], base | env)


def test_every_wait_condition_kind_has_a_flat_argument() -> None:
    kinds = {
        kind
        for branch in CATALOG["WaitCondition"]["oneOf"]
        for kind in branch["properties"]["kind"].get(
            "enum", [branch["properties"]["kind"].get("const")]
        )
    }
    assert kinds == {kind for kind, _ in _mcp_wait.FLAT.values()}
    (tool,) = [t for t in catalog_tools() if t.command == "wait_for"]
    assert "condition" not in tool.tool.input_schema["properties"]
    assert "required" not in tool.tool.input_schema, "which argument is needed depends on the kind"


@pytest.mark.parametrize("example", spec_of("wait_for")["examples"])
def test_each_wait_for_example_has_a_flat_form(example: dict[str, Any]) -> None:
    (tool,) = [t for t in catalog_tools() if t.command == "wait_for"]
    condition = example["condition"]
    flat_name = next(
        name for name, (kind, _) in _mcp_wait.FLAT.items() if kind == condition["kind"]
    )
    _, field = _mcp_wait.FLAT[flat_name]
    arguments: dict[str, Any] = {flat_name: condition[field], "timeoutMs": example["timeoutMs"]}
    if "state" in condition:
        arguments["state"] = condition["state"]
    jsonschema.Draft202012Validator(tool.tool.input_schema).validate(arguments)
    call = parse_arguments(tool, arguments)
    assert call.command is not None
    assert call.command.to_wire() == example


def test_a_new_command_with_two_refs_gets_a_description_beside_each() -> None:
    class DragCommand(WireModel):
        """Drag one element onto another."""

        name: Literal["drag"]
        ref: models.Ref
        target_ref: Annotated[models.Ref, Field(alias="targetRef")]
        steps: int | None = None

    schema, described = input_schema(DragCommand, "write")
    assert described == {"element": "ref", "targetElement": "targetRef"}
    assert list(schema["properties"]) == [
        "element", "ref", "targetElement", "targetRef", "steps", "dryRun"
    ]  # fmt: skip
    assert schema["required"] == ["ref", "targetRef"]
    assert null_defaults(schema) == []


async def test_a_session_that_could_not_be_created_is_tried_again_on_the_next_call(
    clock: FakeClock,
) -> None:
    refused = problem(401, "unauthorized", with_command_id=False)
    _, (first, second), backend = await run(
        clock,
        [refused, refused, session(201), outcome("snapshot"), tombstone()],
        [("browser_snapshot", {}), ("browser_snapshot", {})],
    )
    assert first.is_error
    assert "refused the API key (401 unauthorized: scripted unauthorized)" in text(first)
    assert not second.is_error, text(second)
    assert backend.calls == [CREATE, CREATE, CREATE, SUBMIT, DELETE]
