"""Every row of the outcome table, driven through the connector against the running backend."""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

import pytest

from tests.support.simdevice import ALL_CAPABILITIES, Behaviour
from understudy.generated import models as wire
from understudy_connector import (
    CommandIdConflict,
    CommandOutcomeUnknown,
    ProtocolUpgradeRequired,
    SessionClosedError,
    SessionState,
    SessionTerminal,
    SessionUnavailable,
    WritesBlocked,
)
from understudy_connector.generated import models
from understudy_connector.generated.models import SessionTombstone

from .conftest import ORIGINS, answered, granted, lease_of, release, seen, socket_up

if TYPE_CHECKING:
    from .conftest import Live

CLICK = models.ClickCommand(name="click", ref="g1e1")
SNAPSHOT = models.SnapshotCommand(name="snapshot")


async def test_a_write_pending_past_the_sync_wait_is_polled_until_it_succeeds(live: Live) -> None:
    device = await live.device(Behaviour(execute="hold_result"))
    async with live.client().session(allowed_origins=ORIGINS, profile_state_key="p") as s:
        await socket_up(device, s.id)
        pending = live.audit.when(answered(202))
        click = asyncio.ensure_future(s.click("g1e1"))
        command_id = await granted(device)
        await live.advance(20)  # the backend's synchronous wait ends: 202 poll_same_command
        await seen(pending)
        assert not click.done()
        await release(device, command_id)
        result = await click
    assert (result.name, result.url) == ("click", "https://example.com/")
    assert device.executions == {command_id: 1}
    assert [e.status for e in live.http.commands()] == [202], "submitted once, never again"
    polls = live.http.polls(command_id)
    assert polls[-1].status == 200
    assert {e.status for e in polls[:-1]} <= {202}
    assert set(live.pace.delays) == {1.0}, "each poll waited the Retry-After of the 202"


async def test_a_write_held_past_its_deadline_is_unknown_and_never_retried(live: Live) -> None:
    device = await live.device(Behaviour(execute="hold_result"))
    client = live.client()
    async with client.session(allowed_origins=ORIGINS, profile_state_key="p") as s:
        await socket_up(device, s.id)
        pending = live.audit.when(answered(202))
        click = asyncio.ensure_future(s.click("g1e1"))
        command_id = await granted(device)
        await live.advance(20)
        await seen(pending)
        await live.advance(5)  # the 25 s aggregate deadline of granted work
        with pytest.raises(CommandOutcomeUnknown) as caught:
            await click
        assert str(caught.value.command_id) == command_id
        assert len(live.http.commands()) == 1
        assert live.http.polls(command_id)[-1].status == 409
        # A result arriving after the deadline is acknowledged, but unknown stays unknown.
        lease = next(x for x in device.leases.values() if command_id in x.journal_results)
        await release(device, command_id)
        # The backend handled the late result: the device got its result_ack.
        await device.wait_for(
            lambda: [
                f
                for f in lease.session_frames
                if isinstance(f, wire.SessionServerResultAck) and str(f.command_id) == command_id
            ]
        )
        with pytest.raises(CommandOutcomeUnknown):
            await client.poll_command(s.id, uuid.UUID(command_id))
    assert device.executions == {command_id: 1}


async def test_a_crash_after_start_is_unknown_blocks_writes_and_is_never_retried(
    live: Live,
) -> None:
    device = await live.device(Behaviour(execute="crash_after_start"))
    async with live.client().session(allowed_origins=ORIGINS, profile_state_key="p") as s:
        await socket_up(device, s.id)
        click = asyncio.ensure_future(s.click("g1e1"))
        command_id = await granted(device)
        await device.restart_extension()  # the journal says "started", with no result
        with pytest.raises(CommandOutcomeUnknown) as caught:
            await click
        assert str(caught.value.command_id) == command_id
        assert [e.status for e in live.http.commands()] == [409]
        assert live.http.polls(command_id) == []

        # writes_blocked: the next write is refused before it reaches the device ...
        device.behaviour.execute = "complete"
        with pytest.raises(WritesBlocked) as blocked:
            await s.fill("g1e2", "jane")
        assert blocked.value.status == 409
        # ... while reads still work, and the session says why writes are blocked.
        page = await s.snapshot()
        assert page.nodes[1].ref == "g1e1"
        info = await s.refresh()
        assert isinstance(info, models.Session)
        assert (info.writes_blocked, info.writes_blocked_reason) == (True, "unknown_outcome")
        assert str(info.writes_blocked_command_id) == command_id
    assert device.executions == {command_id: 1}


async def test_a_write_not_started_is_resubmitted_with_the_same_id(live: Live) -> None:
    device = await live.device(Behaviour(ready="silent"))
    async with live.client().session(allowed_origins=ORIGINS, profile_state_key="p") as s:
        await socket_up(device, s.id)
        lease = lease_of(device, s.id)

        def make_ready() -> None:
            device.behaviour.ready = "ack"

        not_started = live.audit.when(answered(504, "command_not_started"), then=make_ready)
        click = asyncio.ensure_future(s.click("g1e1"))
        await device.wait_for(
            lambda: any(isinstance(f, wire.SessionServerWritePrepare) for f in lease.session_frames)
        )
        await live.advance(5)  # the extension never said write_ready: not started
        await seen(not_started)
        result = await click
    assert result.name == "click"
    submitted = live.http.commands()
    assert [e.status for e in submitted] == [504, 200]
    assert submitted[0].body == submitted[1].body, "the same command id and body"
    command_id = submitted[0].body["commandId"]
    prepares = [f for f in lease.session_frames if isinstance(f, wire.SessionServerWritePrepare)]
    assert [str(f.command_id) for f in prepares] == [command_id, command_id]
    assert device.executions == {command_id: 1}


async def test_a_timed_out_read_is_resubmitted_with_the_same_id(live: Live) -> None:
    device = await live.device(Behaviour(read="silent"))
    async with live.client().session(allowed_origins=ORIGINS, profile_state_key="p") as s:
        await socket_up(device, s.id)
        lease = lease_of(device, s.id)

        def answer() -> None:
            device.behaviour.read = "answer"

        timed_out = live.audit.when(answered(504, "command_timed_out"), then=answer)
        snapshot = asyncio.ensure_future(s.snapshot(interactive_only=True))
        await device.wait_for(
            lambda: any(isinstance(f, wire.SessionServerRead) for f in lease.session_frames)
        )
        await live.advance(20)  # the read deadline
        await seen(timed_out)
        page = await snapshot
    assert [node.name for node in page.nodes if node.ref] == ["Sign in", "Username", "Password"]
    submitted = live.http.commands()
    assert [e.status for e in submitted] == [504, 200]
    assert submitted[0].body == submitted[1].body
    reads = [f for f in lease.session_frames if isinstance(f, wire.SessionServerRead)]
    assert {str(f.command_id) for f in reads} == {submitted[0].body["commandId"]}
    assert len(reads) == 2


async def test_a_second_command_waits_for_the_slot_then_succeeds(live: Live) -> None:
    device = await live.device(Behaviour(execute="hold_result"))
    async with live.client().session(allowed_origins=ORIGINS, profile_state_key="p") as s:
        await socket_up(device, s.id)
        busy = live.audit.when(answered(429, "session_busy"))
        click = asyncio.ensure_future(s.click("g1e1"))
        click_id = await granted(device)
        snapshot = asyncio.ensure_future(s.snapshot())
        await seen(busy)
        assert not snapshot.done()
        await release(device, click_id)
        await click
        page = await snapshot
    assert page.nodes[1].name == "Sign in"
    reads = [e for e in live.http.commands() if e.body["command"]["name"] == "snapshot"]
    assert len({e.body["commandId"] for e in reads}) == 1, "every attempt carries the same id"
    assert reads[0].status == 429
    assert reads[-1].status == 200
    assert set(live.pace.delays) == {1.0}, "waited the Retry-After of session_busy"
    assert device.executions == {click_id: 1}


async def test_a_reused_command_id_replays_its_outcome_or_conflicts(live: Live) -> None:
    device = await live.device()
    client = live.client()
    async with client.session(allowed_origins=ORIGINS, profile_state_key="p") as s:
        await socket_up(device, s.id)
        command_id = uuid.uuid4()
        first = await client.submit_command(s.id, CLICK, command_id=command_id)
        again = await client.submit_command(s.id, CLICK, command_id=command_id)
        assert again == first, "the same id and body: the durable outcome, nothing runs again"
        for other, dry_run in ((SNAPSHOT, False), (CLICK, True)):
            with pytest.raises(CommandIdConflict) as caught:
                await client.submit_command(s.id, other, command_id=command_id, dry_run=dry_run)
            assert caught.value.command_id == command_id
    assert device.executions == {str(command_id): 1}
    assert [e.status for e in live.http.commands(command_id)] == [200, 200, 409, 409]


async def test_a_410_ends_the_session_object(live: Live) -> None:
    device = await live.device()
    client = live.client()
    async with client.session(allowed_origins=ORIGINS, profile_state_key="p") as s:
        await socket_up(device, s.id)
        await client.delete_session(s.id)  # another part of the consumer ends it
        with pytest.raises(SessionTerminal):
            await s.snapshot()
        assert s.state is SessionState.ENDED
        sent = len(live.http.exchanges)
        with pytest.raises(SessionClosedError):
            await s.click("g1e1")
        assert len(live.http.exchanges) == sent, "an ended session sends nothing"
    assert s.state.value == SessionState.CLOSED.value  # (by value: mypy narrowed the property)
    tombstone = await client.get_session(s.id)
    assert isinstance(tombstone, SessionTombstone)
    assert tombstone.reason == "deleted"
    assert device.executions == {}


async def test_an_extension_without_safe_writes_gets_426_for_writes_only(live: Live) -> None:
    old = [c for c in ALL_CAPABILITIES if c != "safe_write_v2"]
    device = await live.device(Behaviour(capabilities=old))
    async with live.client().session("attended") as s:
        assert s.info is not None
        assert s.info.status == "awaiting_attach"
        attached = await device.attach(str(s.id))  # a person attaches a tab from the panel
        assert attached.outcome == "attached"
        await socket_up(device, s.id)
        with pytest.raises(ProtocolUpgradeRequired) as caught:
            await s.click("g1e1")
        assert caught.value.status == 426
        assert (await s.hello()).tab.tab_id == 7
    assert device.executions == {}


async def test_an_unavailable_tab_is_waited_for_then_the_command_runs(live: Live) -> None:
    device = await live.device()
    async with live.client().session(allowed_origins=ORIGINS, profile_state_key="p") as s:
        await socket_up(device, s.id)
        await device.disconnect()  # the service worker was evicted: every socket drops
        unavailable = live.audit.when(answered(503, "session_unavailable"))
        snapshot = asyncio.ensure_future(s.snapshot())
        await seen(unavailable)
        await device.connect()  # it comes back: the backend hands the tab a new session ticket
        page = await snapshot
        assert page.title == "Example"
        submitted = live.http.commands()
        assert len({e.body["commandId"] for e in submitted}) == 1
        assert {e.status for e in submitted[:-1]} == {503}
        assert submitted[-1].status == 200
        assert set(live.pace.delays) == {2.0}, "waited the Retry-After of session_unavailable"

        # Past the caller's timeout the connector stops waiting and says so.
        await device.disconnect()
        with pytest.raises(SessionUnavailable):
            await s.execute(SNAPSHOT, command_timeout=0.5)
