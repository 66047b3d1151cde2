"""Session and AsyncSession: create, one typed method per catalog command, always delete."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest

from understudy_connector import (
    AsyncClient,
    AsyncSession,
    BackendUnreachable,
    CommandFailed,
    ProvisioningTimeout,
    RetryConfig,
    Session,
    SessionClosedError,
    SessionState,
    SessionTerminal,
    UnderstudyError,
    UsageError,
)
from understudy_connector.generated import models
from understudy_connector.generated.catalog import COMMAND_KINDS

from .scripted import (
    API_KEY,
    BASE_URL,
    SESSION_ID,
    FakeClock,
    MakeAsyncClient,
    MakeClient,
    ScriptedBackend,
    network_error,
    outcome,
    problem,
    session,
    tombstone,
)

CREATE = ("POST", "/v1/sessions")
SUBMIT = ("POST", f"/v1/sessions/{SESSION_ID}/commands")
DELETE = ("DELETE", f"/v1/sessions/{SESSION_ID}")
UNATTENDED: dict[str, Any] = {
    "allowed_origins": ["https://example.com"],
    "profile_state_key": "crm-bot-profile",
}

# method arguments, keyword arguments, and the command they must put on the wire
COMMAND_CALLS: dict[str, tuple[tuple[Any, ...], dict[str, Any], dict[str, Any]]] = {
    "hello": ((), {}, {"name": "hello"}),
    "get_tabs": ((), {}, {"name": "get_tabs"}),
    "snapshot": (
        (),
        {"interactive_only": True, "max_nodes": 200, "changes_since": "g2s1"},
        {
            "name": "snapshot",
            "interactiveOnly": True,
            "maxNodes": 200,
            "format": "both",
            "changesSince": "g2s1",
        },
    ),
    "screenshot": (
        (),
        {"format": "jpeg", "quality": 70},
        {"name": "screenshot", "format": "jpeg", "quality": 70, "maxWidth": 1280},
    ),
    "wait_for": (
        (),
        {"text": "Welcome", "timeout_ms": 3000},
        {
            "name": "wait_for",
            "condition": {"kind": "text_appears", "text": "Welcome"},
            "timeoutMs": 3000,
        },
    ),
    "navigate": (
        ("https://example.com/login",),
        {},
        {"name": "navigate", "url": "https://example.com/login"},
    ),
    "go_back": ((), {}, {"name": "go_back"}),
    "go_forward": ((), {}, {"name": "go_forward"}),
    "reload": ((), {}, {"name": "reload"}),
    "click": (
        ("g2e14",),
        {"button": "right", "click_count": 2},
        {"name": "click", "ref": "g2e14", "button": "right", "clickCount": 2},
    ),
    "hover": (("g2e9",), {}, {"name": "hover", "ref": "g2e9"}),
    "drag": (
        ("g2e7",),
        {"to": "g2e9"},
        {"name": "drag", "ref": "g2e7", "targetRef": "g2e9", "steps": 10},
    ),
    "focus": (("g2e7",), {}, {"name": "focus", "ref": "g2e7"}),
    "select_text": (
        ("g2e11",),
        {"text": "Terms of service"},
        {"name": "select_text", "ref": "g2e11", "text": "Terms of service"},
    ),
    "type": (
        ("g2e7", "hello"),
        {"submit": True},
        {"name": "type", "ref": "g2e7", "text": "hello", "submit": True},
    ),
    "fill": (
        ("g2e7", "jane@example.com"),
        {},
        {"name": "fill", "ref": "g2e7", "value": "jane@example.com"},
    ),
    "fill_secret": (
        ("g2e8", "vault:login-password"),
        {},
        {"name": "fill_secret", "ref": "g2e8", "secretRef": "vault:login-password"},
    ),
    "press_key": (
        ("Enter",),
        {"modifiers": ["Shift"]},
        {"name": "press_key", "key": "Enter", "modifiers": ["Shift"]},
    ),
    "select_option": (
        ("g2e20", ["fr"]),
        {},
        {"name": "select_option", "ref": "g2e20", "values": ["fr"]},
    ),
    "set_checked": (
        ("g2e21", True),
        {},
        {"name": "set_checked", "ref": "g2e21", "checked": True},
    ),
    "scroll": ((), {"delta_y": 600}, {"name": "scroll", "deltaX": 0, "deltaY": 600}),
    "switch_tab": ((412,), {}, {"name": "switch_tab", "tabId": 412}),
}
RESULT_TYPES: dict[str, type[Any]] = {
    "hello": models.HelloResult,
    "get_tabs": models.GetTabsResult,
    "snapshot": models.SnapshotResult,
    "screenshot": models.ScreenshotResult,
    "wait_for": models.WaitForResult,
}


def test_every_catalog_command_has_a_method_on_both_sessions() -> None:
    assert set(COMMAND_CALLS) == set(COMMAND_KINDS)
    for name in COMMAND_KINDS:
        assert callable(getattr(Session, name)), name
        assert callable(getattr(AsyncSession, name)), name


@pytest.mark.parametrize("name", sorted(COMMAND_CALLS))
def test_each_sync_method_sends_its_command_and_returns_its_typed_result(
    name: str, make_client: MakeClient
) -> None:
    args, kwargs, wire = COMMAND_CALLS[name]
    client, backend = make_client(session(201), outcome(name), tombstone(200))
    with client.session(**UNATTENDED) as live:
        result = getattr(live, name)(*args, **kwargs)
    assert isinstance(result, RESULT_TYPES.get(name, models.WriteResult))
    assert backend.calls == [CREATE, SUBMIT, DELETE]
    assert backend.requests[1].body["command"] == wire
    assert backend.requests[1].body["dryRun"] is False


@pytest.mark.parametrize("name", sorted(COMMAND_CALLS))
async def test_each_async_method_sends_its_command_and_returns_its_typed_result(
    name: str, make_async_client: MakeAsyncClient
) -> None:
    args, kwargs, wire = COMMAND_CALLS[name]
    client, backend = make_async_client(session(201), outcome(name), tombstone(200))
    async with client.session(**UNATTENDED) as live:
        result = await getattr(live, name)(*args, **kwargs)
    assert isinstance(result, RESULT_TYPES.get(name, models.WriteResult))
    assert backend.calls == [CREATE, SUBMIT, DELETE]
    assert backend.requests[1].body["command"] == wire


def test_wait_for_an_element_state_sends_an_element_condition(make_client: MakeClient) -> None:
    client, backend = make_client(session(201), outcome("wait_for"), tombstone())
    with client.session(**UNATTENDED) as live:
        result = live.wait_for(ref="g2e5", state="hidden", timeout_ms=2000)
    assert result.matched is True
    assert backend.requests[1].body["command"] == {
        "name": "wait_for",
        "condition": {"kind": "element_state", "ref": "g2e5", "state": "hidden"},
        "timeoutMs": 2000,
    }


def test_drag_by_an_offset_sends_both_deltas_and_returns_the_dry_run_preview(
    make_client: MakeClient,
) -> None:
    drag = {"fromX": 60, "fromY": 40, "toX": 160, "toY": 40, "steps": 20}
    preview = {"targetRole": "slider", "targetName": "Volume", "allowed": True, "drag": drag}
    result = {"name": "drag", "url": "https://example.com/", "title": "T", "generation": 2}
    client, backend = make_client(
        session(201), outcome("drag", result={**result, "preview": preview}), tombstone()
    )
    with client.session(**UNATTENDED) as live:
        answer = live.drag("g2e4", dx=100, steps=20, dry_run=True)
    assert answer.preview is not None and answer.preview.drag is not None
    assert (answer.preview.drag.to_x, answer.preview.drag.steps) == (160, 20)
    assert backend.requests[1].body["command"] == {
        "name": "drag",
        "ref": "g2e4",
        "dx": 100,
        "dy": 0,
        "steps": 20,
    }
    assert backend.requests[1].body["dryRun"] is True


def test_select_text_in_the_page_returns_what_was_selected(make_client: MakeClient) -> None:
    selection = {"text": "Order confirmed", "length": 15, "start": 40, "end": 55}
    result = {"name": "select_text", "url": "https://example.com/", "title": "T", "generation": 2}
    client, backend = make_client(
        session(201), outcome("select_text", result={**result, "selection": selection}), tombstone()
    )
    with client.session(**UNATTENDED) as live:
        answer = live.select_text(text="Order confirmed")
    assert answer.selection is not None and answer.selection.text == "Order confirmed"
    assert backend.requests[1].body["command"] == {"name": "select_text", "text": "Order confirmed"}


def test_snapshot_refs_are_plain_values_passed_back_to_writes(make_client: MakeClient) -> None:
    client, backend = make_client(session(201), outcome("snapshot"), outcome("click"), tombstone())
    with client.session(**UNATTENDED) as live:
        page = live.snapshot(interactive_only=True)
        button = next(node.ref for node in page.nodes if node.role == "button")
        assert isinstance(button, str)
        live.click(button)
    assert backend.requests[2].body["command"]["ref"] == "g2e7"


def test_a_write_dry_run_sends_dry_run_and_returns_the_preview(make_client: MakeClient) -> None:
    preview = {
        "name": "click",
        "url": "https://example.com/login",
        "title": "Sign in",
        "generation": 2,
        "preview": {"targetRole": "button", "targetName": "Sign in", "allowed": True},
    }
    client, backend = make_client(session(201), outcome("click", result=preview), tombstone())
    with client.session(**UNATTENDED) as live:
        result = live.click("g2e7", dry_run=True)
    assert backend.requests[1].body["dryRun"] is True
    assert result.preview is not None
    assert result.preview.target_name == "Sign in"


def test_the_session_is_deleted_when_the_block_raises(make_client: MakeClient) -> None:
    client, backend = make_client(session(201), tombstone(200))
    with pytest.raises(RuntimeError, match="consumer bug"), client.session(**UNATTENDED):
        raise RuntimeError("consumer bug")
    assert backend.calls == [CREATE, DELETE]


async def test_the_async_session_is_deleted_when_the_block_raises(
    make_async_client: MakeAsyncClient,
) -> None:
    client, backend = make_async_client(session(201), tombstone(200))
    with pytest.raises(RuntimeError, match="consumer bug"):
        async with client.session(**UNATTENDED):
            raise RuntimeError("consumer bug")
    assert backend.calls == [CREATE, DELETE]


def test_a_failed_cleanup_rides_on_the_callers_exception(make_client: MakeClient) -> None:
    client, backend = make_client(
        session(201), network_error, retry=RetryConfig(network_attempts=0)
    )
    with pytest.raises(RuntimeError) as caught, client.session(**UNATTENDED):
        raise RuntimeError("consumer bug")
    assert backend.calls == [CREATE, DELETE]
    assert any("deleting session" in note for note in caught.value.__notes__)


def test_a_failed_cleanup_without_another_exception_is_raised(make_client: MakeClient) -> None:
    client, _ = make_client(session(201), network_error, retry=RetryConfig(network_attempts=0))
    with pytest.raises(BackendUnreachable), client.session(**UNATTENDED):
        pass


def test_410_ends_the_session_object_and_exit_still_deletes(make_client: MakeClient) -> None:
    client, backend = make_client(
        session(201), problem(410, "session_terminal", with_command_id=False), tombstone(200)
    )
    with client.session(**UNATTENDED) as live:
        with pytest.raises(SessionTerminal):
            live.snapshot()
        assert live.state.value == "ended"
        with pytest.raises(SessionClosedError):
            live.snapshot()
    assert live.state is SessionState.CLOSED
    assert backend.calls == [CREATE, SUBMIT, DELETE]


def test_a_session_left_provisioning_is_deleted(make_client: MakeClient) -> None:
    client, backend = make_client(
        session(202, status="provisioning", retry_after=9, location=True),
        session(202, status="closing"),
        retry=RetryConfig(create_timeout=5),
    )
    with pytest.raises(ProvisioningTimeout), client.session(**UNATTENDED):
        pytest.fail("the block must not run")
    assert backend.calls == [CREATE, DELETE]


def test_a_closed_session_sends_nothing_more(make_client: MakeClient) -> None:
    client, backend = make_client(session(201), tombstone(200))
    live = client.session(**UNATTENDED).open()
    assert live.id == SESSION_ID
    live.close()
    assert live.close() is None
    with pytest.raises(SessionClosedError):
        live.hello()
    with pytest.raises(UsageError):
        live.open()
    assert backend.calls == [CREATE, DELETE]


def test_a_failed_outcome_raises_command_failed_with_its_code(make_client: MakeClient) -> None:
    client, _ = make_client(
        session(201),
        outcome("click", status="failed", error=("stale_ref", "take a new snapshot")),
        tombstone(),
    )
    with client.session(**UNATTENDED) as live, pytest.raises(CommandFailed) as caught:
        live.click("g2e7")
    assert caught.value.code == "stale_ref"
    assert caught.value.command == "click"


@pytest.mark.parametrize(
    ("name", "args", "kwargs"),
    [
        ("click", ("button-3",), {}),
        ("fill_secret", ("g2e8", "login-password"), {}),
        ("snapshot", (), {"max_nodes": 0}),
        ("wait_for", (), {}),
        ("wait_for", (), {"text": "a", "url_contains": "/b"}),
        ("wait_for", (), {"ref": "g2e5"}),
        ("wait_for", (), {"ref": "g2e5", "state": "visible", "text": "a"}),
        ("wait_for", (), {"ref": "button-3", "state": "visible"}),
        ("press_key", ("",), {}),
        ("drag", ("g2e7",), {}),
        ("drag", ("g2e7",), {"to": "g2e9", "dx": 10}),
        ("drag", ("g2e7",), {"dx": 10, "steps": 0}),
        ("select_text", (), {}),
        ("select_text", ("g2e11",), {"text": "a", "start": 0, "end": 1}),
        ("select_text", (), {"start": 0, "end": 4}),
        ("select_text", ("g2e11",), {"start": 2}),
    ],
)
def test_invalid_arguments_are_refused_before_sending(
    make_client: MakeClient, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    client, backend = make_client(session(201), tombstone())
    with client.session(**UNATTENDED) as live, pytest.raises(UsageError):
        getattr(live, name)(*args, **kwargs)
    assert backend.calls == [CREATE, DELETE]


def test_refresh_reads_the_session_and_notices_its_end(make_client: MakeClient) -> None:
    client, backend = make_client(session(201), session(200), tombstone(410), tombstone())
    with client.session(**UNATTENDED) as live:
        assert isinstance(live.refresh(), models.Session)
        assert isinstance(live.refresh(), models.SessionTombstone)
        assert live.state is SessionState.ENDED
    read = ("GET", f"/v1/sessions/{SESSION_ID}")
    assert backend.calls == [CREATE, read, read, DELETE]


async def test_a_cancelled_async_session_is_still_deleted(clock: FakeClock) -> None:
    backend = ScriptedBackend([session(201), tombstone(200)])

    async def answer(request: httpx.Request) -> httpx.Response:
        await anyio.lowlevel.checkpoint()  # a real await, where a cancellation is delivered
        return backend(request)

    transport = httpx.MockTransport(answer)
    client = AsyncClient(BASE_URL, API_KEY, transport=transport, sleep=clock.async_sleep)
    async with client:
        with anyio.move_on_after(0.05) as scope:
            async with client.session(**UNATTENDED):
                await anyio.sleep_forever()
    assert scope.cancelled_caught
    assert backend.calls == [CREATE, DELETE]


def _key(backend: ScriptedBackend, index: int) -> str | None:
    key: str | None = backend.requests[index].headers.get("idempotency-key")
    return key


async def test_an_open_cancelled_before_the_create_is_answered_deletes_what_it_made(
    clock: FakeClock,
) -> None:
    # The backend may have created the session while its answer was on the way: the create is
    # repeated once with the same key, which names that session, and the session is deleted.
    backend = ScriptedBackend([session(201), session(201), tombstone(200)])
    first = anyio.Event()

    async def answer(request: httpx.Request) -> httpx.Response:
        reply = backend(request)
        if len(backend.requests) == 1:
            first.set()
            await anyio.sleep_forever()  # the answer never arrives
        return reply

    client = AsyncClient(
        BASE_URL, API_KEY, transport=httpx.MockTransport(answer), sleep=clock.async_sleep
    )
    async with client, anyio.create_task_group() as group:
        opening = client.session(**UNATTENDED)
        group.start_soon(opening.open)
        await first.wait()
        group.cancel_scope.cancel()
    assert backend.calls == [CREATE, CREATE, DELETE]
    assert _key(backend, 0) is not None
    assert _key(backend, 1) == _key(backend, 0)
    assert backend.requests[1].body == backend.requests[0].body


async def test_an_open_cancelled_while_provisioning_deletes_the_session_it_was_told_of(
    clock: FakeClock,
) -> None:
    read = ("GET", f"/v1/sessions/{SESSION_ID}")
    backend = ScriptedBackend(
        [
            session(202, status="provisioning", retry_after=1, location=True),
            session(200),
            tombstone(200),
        ]
    )
    polled = anyio.Event()

    async def answer(request: httpx.Request) -> httpx.Response:
        reply = backend(request)
        if request.method == "GET":
            polled.set()
            await anyio.sleep_forever()
        return reply

    client = AsyncClient(
        BASE_URL, API_KEY, transport=httpx.MockTransport(answer), sleep=clock.async_sleep
    )
    async with client, anyio.create_task_group() as group:
        group.start_soon(client.session(**UNATTENDED).open)
        await polled.wait()
        group.cancel_scope.cancel()
    assert backend.calls == [CREATE, read, DELETE]  # no second create: the id was known


def test_an_open_cut_off_by_the_network_deletes_what_the_backend_may_hold(
    make_client: MakeClient,
) -> None:
    client, backend = make_client(
        network_error, session(201), tombstone(200), retry=RetryConfig(network_attempts=0)
    )
    with pytest.raises(BackendUnreachable), client.session(**UNATTENDED):
        pytest.fail("the block must not run")
    assert backend.calls == [CREATE, CREATE, DELETE]
    assert _key(backend, 1) == _key(backend, 0)


def test_a_refused_create_leaves_nothing_to_delete(make_client: MakeClient) -> None:
    client, backend = make_client(problem(409, "origin_conflict", with_command_id=False))
    with pytest.raises(UnderstudyError), client.session(**UNATTENDED):
        pytest.fail("the block must not run")
    assert backend.calls == [CREATE]


def test_an_attended_create_cut_off_is_not_repeated(make_client: MakeClient) -> None:
    client, backend = make_client(network_error, retry=RetryConfig(network_attempts=0))
    with pytest.raises(BackendUnreachable), client.session("attended"):
        pytest.fail("the block must not run")
    assert backend.calls == [CREATE]
