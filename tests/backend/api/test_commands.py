"""The command plane through HTTP and real sockets, with a simulated device counting executions."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from tests.backend.conftest import (
    Backend,
    idem,
    post_create,
    start_backend,
    stop_backend,
    unattended,
)
from tests.support.simdevice import ALL_CAPABILITIES, Behaviour, SimulatedDevice
from tests.support.stored import stored
from understudy._store import vault
from understudy.generated import models as m

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from understudy._store.commands import CommandRow


async def _session(
    backend: Backend,
    http: Any,
    behaviour: Behaviour | None = None,
) -> tuple[SimulatedDevice, str]:
    device = await backend.device(behaviour=behaviour)
    response = await post_create(backend, http, unattended())
    assert response.status_code == 201, response.text
    session_id: str = response.json()["sessionId"]
    lease = next(iter(device.leases.values()))
    if device.behaviour.open_session_sockets:
        await device.wait_for(lambda: lease.session_frames)  # hello_ack: the socket is up
    return device, session_id


def _cmd(command: dict[str, Any], command_id: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"commandId": command_id or str(uuid.uuid4()), "command": command, **extra}


async def _post_later(
    backend: Backend,
    http: Any,
    url: str,
    body: dict[str, Any],
    seconds: float,
    reached: Callable[[], object],
) -> Any:
    """Submit; once the device shows the command `reached` where the test wants it, let
    `seconds` pass on the manual clock while the request waits."""
    task = asyncio.ensure_future(http.post(url, json=body))
    await backend.until(reached, "the command reached the device")
    await backend.clock.advance(seconds)
    return await task


def _row(backend: Backend, session_id: str, command_id: str) -> CommandRow:
    with backend.services.storage.transaction() as tx:
        row = tx.commands.get(session_id, command_id)
    assert row is not None
    return row


def _received(device: SimulatedDevice, command_id: str, kind: type[Any]) -> bool:
    """Whether the device got a `kind` frame (read, write_prepare, ...) for the command."""
    return any(
        isinstance(frame, kind) and str(frame.command_id) == command_id
        for lease in device.leases.values()
        for frame in lease.session_frames
    )


async def test_a_read_returns_its_durable_result(backend: Backend) -> None:
    async with backend.client(backend.api_key()) as http:
        _, sid = await _session(backend, http)
        body = _cmd({"name": "snapshot", "interactiveOnly": True})
        response = await http.post(f"/v1/sessions/{sid}/commands", json=body)
        assert response.status_code == 200, response.text
        outcome = response.json()
        assert (outcome["status"], outcome["name"]) == ("succeeded", "snapshot")
        assert outcome["result"]["nodes"][1]["ref"] == "g1e1"
        polled = await http.get(f"/v1/sessions/{sid}/commands/{body['commandId']}")
        assert polled.json() == outcome


async def test_a_write_runs_the_durable_sequence_once(backend: Backend) -> None:
    async with backend.client(backend.api_key()) as http:
        device, sid = await _session(backend, http)
        body = _cmd({"name": "click", "ref": "g1e1"})
        response = await http.post(f"/v1/sessions/{sid}/commands", json=body)
        assert response.status_code == 200, response.text
        assert response.json()["result"]["name"] == "click"
        lease = next(iter(device.leases.values()))
        kinds = [f.type for f in lease.session_frames]
        assert kinds[-3:] == ["write_prepare", "write_grant", "result_ack"]
        prepare = next(
            f for f in lease.session_frames if isinstance(f, m.SessionServerWritePrepare)
        )
        assert "command" not in prepare.to_wire()  # metadata only
        # The same command id and body returns the durable outcome; nothing runs again.
        again = await http.post(f"/v1/sessions/{sid}/commands", json=body)
        assert again.json() == response.json()
        assert device.executions == {body["commandId"]: 1}
        assert lease.journal == {}


async def test_same_command_id_with_another_fingerprint_conflicts(backend: Backend) -> None:
    async with backend.client(backend.api_key()) as http:
        _, sid = await _session(backend, http)
        body = _cmd({"name": "click", "ref": "g1e1"})
        assert (await http.post(f"/v1/sessions/{sid}/commands", json=body)).status_code == 200
        dry = await http.post(f"/v1/sessions/{sid}/commands", json={**body, "dryRun": True})
        assert dry.status_code == 409
        assert (dry.json()["code"], dry.json()["commandId"]) == (
            "command_id_conflict",
            body["commandId"],
        )


async def test_another_command_while_one_owns_the_slot_is_session_busy(backend: Backend) -> None:
    async with backend.client(backend.api_key()) as http:
        device, sid = await _session(backend, http, Behaviour(read="silent"))
        hello = _cmd({"name": "hello"})
        first = asyncio.ensure_future(http.post(f"/v1/sessions/{sid}/commands", json=hello))
        await backend.until(
            lambda: _received(device, hello["commandId"], m.SessionServerRead),
            "the first command is sent to the device",
        )
        busy = await http.post(f"/v1/sessions/{sid}/commands", json=_cmd({"name": "get_tabs"}))
        assert busy.status_code == 429
        assert busy.json()["code"] == "session_busy"
        assert busy.headers["retry-after"] == "1"
        await backend.clock.advance(20)
        assert (await first).status_code == 504


async def test_a_read_that_times_out_is_504_and_safe_to_retry(backend: Backend) -> None:
    async with backend.client(backend.api_key()) as http:
        device, sid = await _session(backend, http, Behaviour(read="silent"))
        body = _cmd({"name": "wait_for", "condition": {"kind": "text_appears", "text": "Hi"}})
        url = f"/v1/sessions/{sid}/commands"
        cid = body["commandId"]
        timed_out = await _post_later(
            backend, http, url, body, 20, lambda: _received(device, cid, m.SessionServerRead)
        )
        assert timed_out.status_code == 504
        assert (timed_out.json()["code"], timed_out.json()["retryPolicy"]) == (
            "command_timed_out",
            "retry_same_command",
        )
        poll = await http.get(f"{url}/{body['commandId']}")
        assert poll.json()["code"] == "command_timed_out"
        device.behaviour.read = "answer"
        retried = await http.post(url, json=body)
        assert retried.status_code == 200


async def test_a_write_not_ready_in_5s_is_not_started_and_retry_runs_it_once(
    backend: Backend,
) -> None:
    async with backend.client(backend.api_key()) as http:
        device, sid = await _session(backend, http, Behaviour(ready="silent"))
        url = f"/v1/sessions/{sid}/commands"
        body = _cmd({"name": "type", "ref": "g1e2", "text": "hello"})
        cid = body["commandId"]
        first = await _post_later(
            backend, http, url, body, 5, lambda: _received(device, cid, m.SessionServerWritePrepare)
        )
        assert first.status_code == 504
        assert first.json()["code"] == "command_not_started"
        assert device.executions == {}
        device.behaviour.ready = "ack"
        retried = await http.post(url, json=body)
        assert retried.status_code == 200
        assert device.executions == {body["commandId"]: 1}


async def test_granted_work_past_20s_is_202_then_unknown_at_25s_and_blocks_writes(
    backend: Backend,
) -> None:
    async with backend.client(backend.api_key()) as http:
        device, sid = await _session(backend, http, Behaviour(execute="hold_result"))
        url = f"/v1/sessions/{sid}/commands"
        body = _cmd({"name": "navigate", "url": "https://example.com/next"})
        cid = body["commandId"]
        pending = await _post_later(
            backend, http, url, body, 20, lambda: device.executions.get(cid)
        )
        assert pending.status_code == 202
        assert pending.json() == {
            "commandId": body["commandId"],
            "name": "navigate",
            "status": "granted",
            "retryPolicy": "poll_same_command",
        }
        assert pending.headers["location"] == f"{url}/{body['commandId']}"
        await backend.clock.advance(5)
        await backend.until(
            lambda: backend.command_state(sid, body["commandId"]) == "unknown",
            "the grant deadline settles the command as unknown",
        )
        unknown = await http.get(f"{url}/{body['commandId']}")
        assert unknown.status_code == 409
        assert unknown.json()["code"] == "command_outcome_unknown"
        session = (await http.get(f"/v1/sessions/{sid}")).json()
        assert (
            session["writesBlocked"],
            session["writesBlockedReason"],
            session["writesBlockedCommandId"],
        ) == (True, "unknown_outcome", body["commandId"])
        blocked = await http.post(url, json=_cmd({"name": "reload"}))
        assert (blocked.status_code, blocked.json()["code"]) == (409, "writes_blocked")
        assert (await http.post(url, json=_cmd({"name": "snapshot"}))).status_code == 200
        assert device.executions == {body["commandId"]: 1}


async def test_restart_replays_completed_results_and_marks_started_writes_unknown(
    backend: Backend,
) -> None:
    async with backend.client(backend.api_key()) as http:
        device, sid = await _session(backend, http, Behaviour(execute="hold_result"))
        url = f"/v1/sessions/{sid}/commands"
        done = _cmd({"name": "click", "ref": "g1e1"})
        task = asyncio.ensure_future(http.post(url, json=done))
        await device.wait_for(lambda: device.executions.get(done["commandId"]))
        await device.restart_extension()  # same browser epoch: the journal survives
        device.behaviour.execute = "complete"
        response = await task
        assert response.status_code == 200, response.text  # the replayed result
        assert device.executions == {done["commandId"]: 1}
        # A write that started and lost its result before the restart is unknown, never re-run.
        device.behaviour.execute = "crash_after_start"
        crashed = _cmd({"name": "click", "ref": "g1e1"})
        task = asyncio.ensure_future(http.post(url, json=crashed))
        await device.wait_for(lambda: device.executions.get(crashed["commandId"]))
        await device.restart_extension()
        answer = await task
        assert (answer.status_code, answer.json()["code"]) == (409, "command_outcome_unknown")
        assert device.executions[crashed["commandId"]] == 1


async def test_a_socket_drop_before_grant_is_not_started(backend: Backend) -> None:
    async with backend.client(backend.api_key()) as http:
        device, sid = await _session(backend, http, Behaviour(ready="silent"))
        body = _cmd({"name": "click", "ref": "g1e1"})
        task = asyncio.ensure_future(http.post(f"/v1/sessions/{sid}/commands", json=body))
        await device.wait_for(
            lambda: _received(device, body["commandId"], m.SessionServerWritePrepare)
        )
        await device.restart_extension()
        response = await task
        assert (response.status_code, response.json()["code"]) == (504, "command_not_started")
        lease = next(iter(device.leases.values()))
        # The preparation is cancelled by the hello_ack of the new connection.
        await device.wait_for(lambda: body["commandId"] not in lease.journal)


async def test_extension_without_safe_write_gets_426_for_writes_only(backend: Backend) -> None:
    caps = [c for c in ALL_CAPABILITIES if c != "safe_write_v2"]
    async with backend.client(backend.api_key()) as http:
        device = await backend.device(behaviour=Behaviour(capabilities=caps))
        # Without safe writes the device is no unattended candidate; attach a tab instead.
        sid = (await http.post("/v1/sessions")).json()["sessionId"]
        await device.attach(sid)
        await backend.until(
            lambda: backend.session_status(sid) == "connected", "the session socket is up"
        )
        url = f"/v1/sessions/{sid}/commands"
        write = await http.post(url, json=_cmd({"name": "reload"}))
        assert (write.status_code, write.json()["code"]) == (426, "protocol_upgrade_required")
        assert (await http.post(url, json=_cmd({"name": "hello"}))).status_code == 200


async def test_extension_without_element_state_waits_gets_426_for_that_condition_only(
    backend: Backend,
) -> None:
    # An older extension would answer the unknown condition as matched: it is never sent there.
    caps = [c for c in ALL_CAPABILITIES if c != "wait_for_element_state_v1"]
    async with backend.client(backend.api_key()) as http:
        device, sid = await _session(backend, http, Behaviour(capabilities=caps))
        url = f"/v1/sessions/{sid}/commands"
        element = {"kind": "element_state", "ref": "g1e1", "state": "visible"}
        refused = await http.post(url, json=_cmd({"name": "wait_for", "condition": element}))
        assert (refused.status_code, refused.json()["code"]) == (426, "protocol_upgrade_required")
        assert "element" in refused.json()["detail"]
        text = {"kind": "text_appears", "text": "Welcome"}
        waited = await http.post(url, json=_cmd({"name": "wait_for", "condition": text}))
        assert waited.status_code == 200, waited.text
        lease = next(iter(device.leases.values()))
        reads = [f for f in lease.session_frames if isinstance(f, m.SessionServerRead)]
        kinds = [f.command.to_wire()["condition"]["kind"] for f in reads]
        assert kinds == ["text_appears"]


@pytest.mark.parametrize(
    ("capability", "command"),
    [
        ("drag_v1", {"name": "drag", "ref": "g1e1", "dx": 40, "dy": 0}),
        ("select_text_v1", {"name": "select_text", "ref": "g1e2", "text": "Us"}),
    ],
)
async def test_extension_without_a_verb_capability_gets_426_for_that_verb_only(
    backend: Backend, capability: str, command: dict[str, Any]
) -> None:
    # An older extension would prepare the write and then fail it with a decoder message.
    caps = [c for c in ALL_CAPABILITIES if c != capability]
    async with backend.client(backend.api_key()) as http:
        device, sid = await _session(backend, http, Behaviour(capabilities=caps))
        url = f"/v1/sessions/{sid}/commands"
        for dry_run in (False, True):
            refused = await http.post(url, json=_cmd(command, dryRun=dry_run))
            assert (refused.status_code, refused.json()["code"]) == (
                426,
                "protocol_upgrade_required",
            ), refused.text
            assert command["name"] in refused.json()["detail"]
        clicked = await http.post(url, json=_cmd({"name": "click", "ref": "g1e1"}))
        assert clicked.status_code == 200, clicked.text
        lease = next(iter(device.leases.values()))
        prepared = [
            f.name for f in lease.session_frames if isinstance(f, m.SessionServerWritePrepare)
        ]
        assert prepared == ["click"]


async def test_drag_and_select_text_run_as_journaled_writes_with_previews(
    backend: Backend,
) -> None:
    async with backend.client(backend.api_key()) as http:
        device, sid = await _session(backend, http)
        url = f"/v1/sessions/{sid}/commands"
        drag = {"name": "drag", "ref": "g1e2", "targetRef": "g1e3"}
        dry = await http.post(url, json=_cmd(drag, dryRun=True))
        assert dry.status_code == 200, dry.text
        assert dry.json()["result"]["preview"]["drag"]["dropName"] == "Password"
        select = {"name": "select_text", "ref": "g1e1", "text": "Sign"}
        done = await http.post(url, json=_cmd(select))
        assert done.status_code == 200, done.text
        assert done.json()["result"]["selection"] == {
            "text": "Sign",
            "length": 4,
            "start": 0,
            "end": 4,
        }
        lease = next(iter(device.leases.values()))
        grants = [f for f in lease.session_frames if isinstance(f, m.SessionServerWriteGrant)]
        assert [(g.command.to_wire()["name"], g.dry_run) for g in grants] == [
            ("drag", True),
            ("select_text", False),
        ]


async def test_commands_need_a_live_socket_and_a_live_session(backend: Backend) -> None:
    async with backend.client(backend.api_key()) as http:
        _, sid = await _session(backend, http, Behaviour(open_session_sockets=False))
        url = f"/v1/sessions/{sid}/commands"
        down = await http.post(url, json=_cmd({"name": "hello"}))
        assert (down.status_code, down.json()["code"]) == (503, "session_unavailable")
        assert int(down.headers["retry-after"]) > 0
        await http.delete(f"/v1/sessions/{sid}")
        gone = await http.post(url, json=_cmd({"name": "hello"}))
        assert (gone.status_code, gone.json()["code"]) == (410, "session_terminal")
        missing = await http.get(f"{url}/{uuid.uuid4()}")
        assert (missing.status_code, missing.json()["code"]) == (404, "command_not_found")
        strict = await http.post(url, json={**_cmd({"name": "hello"}), "extra": 1})
        assert strict.status_code == 400


async def test_an_admitted_command_moves_the_idle_expiry(backend: Backend) -> None:
    async with backend.client(backend.api_key()) as http:
        device, sid = await _session(backend, http)
        before = (await http.get(f"/v1/sessions/{sid}")).json()
        await backend.clock.advance(60)
        await device.heartbeat()
        await http.post(f"/v1/sessions/{sid}/commands", json=_cmd({"name": "hello"}))
        after = (await http.get(f"/v1/sessions/{sid}")).json()
        assert after["idleExpiresAt"] > before["idleExpiresAt"]
        assert after["commandCount"] == 1
        assert "lastCommandAt" in after


async def test_fill_secret_resolves_plaintext_only_into_the_grant(
    backend: Backend, tmp_path: Path
) -> None:
    plaintext = "correct horse battery staple 7f3a"
    services = backend.services
    with services.storage.transaction() as tx:
        vault.put(
            tx.vault, services.keys, "acme", "login-password", plaintext, services.clock.now()
        )
    async with backend.client(backend.api_key()) as http:
        device, sid = await _session(backend, http)
        url = f"/v1/sessions/{sid}/commands"
        body = _cmd({"name": "fill_secret", "ref": "g1e3", "secretRef": "vault:login-password"})
        response = await http.post(url, json=body)
        assert response.status_code == 200, response.text
        assert device.secrets_seen == [plaintext]
        assert plaintext not in response.text
        missing = await http.post(
            url, json=_cmd({"name": "fill_secret", "ref": "g1e3", "secretRef": "vault:nope"})
        )
        assert missing.json()["error"]["code"] == "secret_not_found"
    kept = stored(backend.settings)
    assert b"login-password" in kept  # the scan read the vault's row
    for form in (plaintext.encode(), plaintext.encode().hex().encode()):
        assert form not in kept
    assert plaintext not in str(services.telemetry.events)


async def test_dialogs_are_deduplicated_and_the_newest_50_kept(backend: Backend) -> None:
    async with backend.client(backend.api_key()) as http:
        device, sid = await _session(backend, http)
        lease = next(iter(device.leases.values()))
        ids = [str(uuid.uuid4()) for _ in range(52)]
        for i, dialog_id in enumerate([ids[0], *ids]):  # the first one twice
            await device.send_dialog(
                sid,
                {
                    "dialogId": dialog_id,
                    "dialogType": "alert",
                    "message": f"m{i}",
                    "accepted": True,
                    "openedAt": "2026-11-30T09:00:00Z",
                    "delivery": "delivered",
                },
            )
        await device.wait_for(
            lambda: sum(isinstance(f, m.SessionServerDialogAck) for f in lease.session_frames) == 53
        )
        dialogs = (await http.get(f"/v1/sessions/{sid}")).json()["dialogs"]
        assert len(dialogs) == 50
        assert dialogs[0]["dialogId"] == ids[-1]
        assert ids[0] not in {d["dialogId"] for d in dialogs}


async def test_browser_epoch_change_makes_granted_writes_unknown(backend: Backend) -> None:
    async with backend.client(backend.api_key()) as http:
        device, sid = await _session(backend, http, Behaviour(execute="hold_result"))
        body = _cmd({"name": "click", "ref": "g1e1"})
        task = asyncio.ensure_future(http.post(f"/v1/sessions/{sid}/commands", json=body))
        await device.wait_for(lambda: device.executions.get(body["commandId"]))
        await device.restart_browser()
        response = await task
        assert (response.status_code, response.json()["code"]) == (409, "command_outcome_unknown")
        session = (await http.get(f"/v1/sessions/{sid}")).json()
        assert session["writesBlocked"] is True


@pytest.mark.parametrize(
    ("quota", "limit"),
    [
        ("commands_per_session_per_min", 3),
        ("commands_per_tenant_per_min", 3),
        ("commands_per_session_lifetime", 3),
    ],
)
async def test_command_quotas_answer_429_rate_limited(
    tmp_path: Path, quota: str, limit: int
) -> None:
    probe = await start_backend(tmp_path / "probe")
    policy = replace(probe.settings.quota, **{quota: limit})
    await stop_backend(probe)
    backend = await start_backend(tmp_path, quota=policy)
    try:
        async with backend.client(backend.api_key()) as http:
            _, sid = await _session(backend, http)
            url = f"/v1/sessions/{sid}/commands"
            for _ in range(limit):
                assert (await http.post(url, json=_cmd({"name": "hello"}))).status_code == 200
            refused = await http.post(url, json=_cmd({"name": "hello"}))
            assert (refused.status_code, refused.json()["code"]) == (429, "rate_limited")
            assert int(refused.headers["retry-after"]) >= 1
    finally:
        await stop_backend(backend)


async def test_health_frames_become_content_free_telemetry(backend: Backend) -> None:
    device = await backend.device()
    await device.send_frame(
        {
            "type": "health",
            "status": "degraded",
            "counters": {"dialogOverflow": 2, "popupsClosed": 1},
        }
    )

    def health() -> list[dict[str, Any]]:
        return [e for e in backend.services.telemetry.events if e["event"] == "device.health"]

    await backend.until(lambda: len(health()) >= 2, "both health counters are reported")
    assert {(e["reason"], e["count"]) for e in health()} == {
        ("dialogOverflow", 2),
        ("popupsClosed", 1),
    }
    assert all(e["device"] != "laptop-1" for e in health())  # a pseudonym, never the raw id


async def test_a_dry_run_fill_secret_never_decrypts_the_secret(backend: Backend) -> None:
    services = backend.services
    with services.storage.transaction() as tx:
        vault.put(tx.vault, services.keys, "acme", "pin", "4711-secret", services.clock.now())
    async with backend.client(backend.api_key()) as http:
        device, sid = await _session(backend, http)
        url = f"/v1/sessions/{sid}/commands"
        command = {"name": "fill_secret", "ref": "g1e3", "secretRef": "vault:pin"}
        preview = await http.post(url, json=_cmd(command, dryRun=True))
        assert preview.status_code == 200, preview.text
        assert device.secrets_seen == []
        missing = {**command, "secretRef": "vault:absent"}
        refused = await http.post(url, json=_cmd(missing, dryRun=True))
        assert refused.json()["error"]["code"] == "secret_not_found"


async def test_the_first_command_right_after_201_finds_the_session_socket_up(
    backend: Backend,
) -> None:
    await backend.device()
    async with backend.client(backend.api_key()) as http:
        created = await http.post("/v1/sessions", json=unattended(), headers=idem())
        assert created.status_code == 201
        sid = created.json()["sessionId"]
        first = await http.post(f"/v1/sessions/{sid}/commands", json=_cmd({"name": "hello"}))
        assert first.status_code == 200, first.text


async def test_a_session_keeps_no_outcome_waiter_for_commands_nobody_waits_for(
    backend: Backend,
) -> None:
    # One waiter per request while it waits, never an entry per command for the session's life.
    async with backend.client(backend.api_key()) as http:
        _, sid = await _session(backend, http)
        url = f"/v1/sessions/{sid}/commands"
        for _ in range(5):
            done = await http.post(url, json=_cmd({"name": "click", "ref": "g1e1"}))
            assert done.status_code == 200, done.text
        agent = backend.services.session_agent(sid)
        assert agent._events == {}  # the memory a long session would grow


async def test_only_the_outcome_of_a_write_wakes_the_request_waiting_for_it(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The waiter returns on an outcome (or its deadline, which a grant keeps): waking it at the
    # grant would only make it read the row and wait again.
    async with backend.client(backend.api_key()) as http:
        _, sid = await _session(backend, http)
        agent = backend.services.session_agent(sid)
        woken: list[set[str]] = []
        deliver = agent._deliver

        async def spied(out: Any) -> None:
            woken.append(set(out.wake))
            await deliver(out)

        monkeypatch.setattr(agent._turns, "_deliver", spied)  # what the turns deliver with
        body = _cmd({"name": "click", "ref": "g1e1"})
        done = await http.post(f"/v1/sessions/{sid}/commands", json=body)
        assert done.status_code == 200, done.text
    assert woken == [set(), set(), {body["commandId"]}]  # admission, grant, result


async def test_the_ready_deadline_the_admission_hands_to_the_timer_fires_exactly_then(
    backend: Backend,
) -> None:
    # The admission turn arms the timer with the due time it computed itself (not a query), and
    # the result turn of the write before it disarmed the timer: only the timer ends the write at
    # 5 s (the waiting request itself looks again only at 20 s).
    async with backend.client(backend.api_key()) as http:
        device, sid = await _session(backend, http)
        url = f"/v1/sessions/{sid}/commands"
        done = await http.post(url, json=_cmd({"name": "click", "ref": "g1e1"}))
        assert done.status_code == 200, done.text
        agent = backend.services.session_agent(sid)
        assert agent.timer_due is None  # the result turn: nothing of the session is open
        device.behaviour.ready = "silent"
        body = _cmd({"name": "type", "ref": "g1e2", "text": "hi"})
        cid = body["commandId"]
        waiting = asyncio.ensure_future(http.post(url, json=body))
        await backend.until(
            lambda: _received(device, cid, m.SessionServerWritePrepare), "the prepare arrived"
        )
        assert agent.timer_due == _row(backend, sid, cid).ready_deadline
        await backend.clock.advance(4.99)
        for _ in range(50):  # a timer armed too early would have settled it by now
            await asyncio.sleep(0)
        assert backend.command_state(sid, cid) == "preparing"
        await backend.clock.advance(0.01)
        await backend.until(
            lambda: backend.command_state(sid, cid) == "not_started", "the ready deadline fired"
        )
        answer = await waiting
        assert (answer.status_code, answer.json()["code"]) == (504, "command_not_started")


async def test_the_deadline_the_grant_hands_to_the_timer_fires_exactly_then(
    backend: Backend,
) -> None:
    # The write_ready turn arms the timer with the granted row's deadline (25 s after admission)
    # instead of a query.
    async with backend.client(backend.api_key()) as http:
        device, sid = await _session(backend, http, Behaviour(execute="hold_result"))
        url = f"/v1/sessions/{sid}/commands"
        body = _cmd({"name": "navigate", "url": "https://example.com/next"})
        cid = body["commandId"]
        waiting = asyncio.ensure_future(http.post(url, json=body))
        await backend.until(lambda: device.executions.get(cid), "the write ran")
        assert backend.services.session_agent(sid).timer_due == _row(backend, sid, cid).deadline
        await backend.clock.advance(20)
        assert (await waiting).status_code == 202
        await backend.clock.advance(4.99)
        for _ in range(50):  # a timer armed too early would have settled it by now
            await asyncio.sleep(0)
        assert backend.command_state(sid, cid) == "granted"
        await backend.clock.advance(0.01)
        await backend.until(
            lambda: backend.command_state(sid, cid) == "unknown", "the grant deadline fired"
        )
