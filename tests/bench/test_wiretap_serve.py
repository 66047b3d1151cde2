"""The wiretapped server: a governed write is stamped at each of its crossings, in order, with
nothing of a frame but its type and command id; and the stamps split the hop table."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

import pytest
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from bench import _hops, _wiretap_serve
from tests.backend.conftest import post_create, start_backend, stop_backend, unattended
from understudy._server import GuardedHttpToolsProtocol

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture
def wire_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Patches this process's uvicorn protocols as the launcher does; undone after the test."""
    patched = [
        (WebSocketsSansIOProtocol, "send_receive_event_to_app"),
        (WebSocketsSansIOProtocol, "send"),
        (GuardedHttpToolsProtocol, "on_message_complete"),
        (RequestResponseCycle, "send"),
    ]
    for owner, name in patched:
        monkeypatch.setattr(owner, name, getattr(owner, name))
    _wiretap_serve.install()
    out = tmp_path / "wire.json"
    monkeypatch.setenv("BENCH_WIRE_OUT", str(out))
    return out


async def test_a_write_is_stamped_at_each_crossing_in_order(tmp_path: Path, wire_out: Path) -> None:
    backend = await start_backend(tmp_path)
    try:
        async with backend.client(backend.api_key()) as http:
            device = await backend.device()
            created = await post_create(backend, http, unattended())
            assert created.status_code == 201, created.text
            session_id = created.json()["sessionId"]
            lease = next(iter(device.leases.values()))
            await device.wait_for(lambda: lease.session_frames)  # hello_ack: the socket is up
            _wiretap_serve._start(0, None)
            command_id = str(uuid.uuid4())
            body = {"commandId": command_id, "command": {"name": "click", "ref": "g1e1"}}
            answer = await http.post(f"/v1/sessions/{session_id}/commands", json=body)
            assert answer.status_code == 200, answer.text
            _wiretap_serve._stop(0, None)
    finally:
        await stop_backend(backend)

    _assert_stamped_in_order(wire_out, command_id, session_id)


def _assert_stamped_in_order(wire_out: Path, command_id: str, session_id: str) -> None:
    written = wire_out.read_text()
    record = json.loads(written)
    stamps = _hops.wire_stamps(record)
    times = [stamps[(crossing, command_id)] for crossing in _hops.CROSSINGS]
    assert times == sorted(times)
    assert all(len(entry) == 4 for entry in record)  # kind, type, command id, time
    assert session_id not in written  # nothing else of a frame is kept


def test_no_record_is_kept_outside_a_window(wire_out: Path) -> None:
    _wiretap_serve.stamp("ws_out", '{"type":"write_grant"}')
    _wiretap_serve._start(0, None)
    _wiretap_serve.stamp("ws_in", b'{"type": "result", "commandId": "' + b"0" * 36 + b'"}')
    _wiretap_serve._stop(0, None)
    _wiretap_serve.stamp("ws_out", '{"type":"write_prepare"}')

    [entry] = json.loads(wire_out.read_text())
    assert entry[:3] == ["ws_in", "result", "0" * 36]


ID = "00000000-0000-4000-8000-000000000001"


def test_the_stamps_split_each_crossing_into_the_server_and_the_sockets() -> None:
    # Client 0 -> 40; server admitted 2, completed 31; the worker's frames at 5, 6, 9, 30.
    trace: list[list[Any]] = [
        ["recv", "write_prepare", ID, 5.0, 5.0],
        ["send", "write_ready", ID, 6.0, 6.0],
        ["recv", "write_grant", ID, 9.0, 9.0],
        ["cdp", "Input.dispatchMouseEvent", None, 10.0, 29.0],
        ["send", "result", ID, 30.0, 30.0],
    ]
    wire = _hops.wire_stamps(
        [
            ["http_in", "?", ID, 1.0],
            ["ws_out", "write_prepare", ID, 4.0],
            ["ws_in", "write_ready", ID, 6.5],
            ["ws_out", "write_grant", ID, 8.0],
            ["ws_in", "result", ID, 30.5],
            ["http_out", "?", ID, 33.0],
            ["ws_out", "write_grant", None, 50.0],  # no command id: not a stamp of this write
        ]
    )

    report = _hops.breakdown({ID: (0.0, 40.0)}, {ID: (2.0, 31.0)}, trace, 0.0, wire)

    hops = {key: cell["p50"] for key, cell in report["hops_ms"].items() if cell["n"]}
    assert (hops["wire_request"], hops["server_admit"]) == (1.0, 1.0)
    assert (hops["server_prepare"], hops["wire_prepare"]) == (2.0, 1.0)
    assert (hops["wire_ready"], hops["server_grant"], hops["wire_grant"]) == (0.5, 1.5, 1.0)
    assert (hops["wire_result"], hops["server_outcome"]) == (0.5, 0.5)
    assert (hops["server_reply"], hops["wire_reply"]) == (2.0, 7.0)
    # The server's and the sockets' parts make up what is neither the browser nor the extension.
    assert hops["elsewhere_server"] == 7.0
    assert hops["elsewhere_sockets"] == 11.0
    assert hops["elsewhere_server"] + hops["elsewhere_sockets"] == hops["overhead_elsewhere"]


def test_without_a_stamp_of_the_server_no_crossing_is_split() -> None:
    trace: list[list[Any]] = [
        ["recv", "write_prepare", ID, 5.0, 5.0],
        ["send", "write_ready", ID, 6.0, 6.0],
        ["recv", "write_grant", ID, 9.0, 9.0],
        ["send", "result", ID, 30.0, 30.0],
    ]
    wire = _hops.wire_stamps([["http_in", "?", ID, 1.0]])

    report = _hops.breakdown({ID: (0.0, 40.0)}, {ID: (2.0, 31.0)}, trace, 0.0, wire)

    assert report["commands"] == 1
    assert report["hops_ms"]["server_grant"] == {"n": 0}
