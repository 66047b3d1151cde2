"""Connection limits through real sockets: silent and trickling HTTP connections, sockets that
never say hello, frame floods and oversized frames. The limits are set small so each test takes
about a second; the figures of the defaults are in bench/ (`connection_limits`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import websockets

from bench._http import HttpConnection
from bench.connection_limits import SlowClients, healthz_latencies
from tests.backend.conftest import Backend, idem, start_backend, stop_backend, unattended
from tests.support.simdevice import Behaviour
from understudy import _server
from understudy._config import MAX_FRAME_BYTES, MAX_SCREENSHOT_CHARS, ConnectionLimits
from understudy._server import server_config
from understudy.generated import models as m
from understudy.http import create_app

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

LIMITS = ConnectionLimits(
    request_head_timeout_s=0.5,
    hello_timeout_s=0.5,
    socket_frames_per_s=5.0,
    socket_frame_burst=10,
    max_frame_bytes=64 * 1024,
)
PATIENCE_S = 5.0  # far above every limit above: a test fails rather than hangs
# Transfer-Encoding with Content-Length is how requests are smuggled past a proxy that reads the
# other framing (RFC 9112 §6.1); the parser refuses it outright.
FRAMED_TWO_WAYS = (
    b"POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)


@pytest.fixture
async def limited(tmp_path: Path) -> AsyncIterator[Backend]:
    running = await start_backend(tmp_path, connection_limits=LIMITS)
    try:
        yield running
    finally:
        await stop_backend(running)


def _closed(backend: Backend) -> list[tuple[Any, Any]]:
    return [
        (event["kind"], event["reason"])
        for event in backend.services.telemetry.events
        if event["event"] == "connection.closed"
    ]


async def _raw(backend: Backend) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", backend.settings.port)


async def _healthz(backend: Backend) -> None:
    async with httpx.AsyncClient(base_url=backend.url, timeout=PATIENCE_S) as http:
        response = await http.get("/healthz")
        assert response.status_code == 200, response.text


async def test_a_connection_that_sends_nothing_is_closed(limited: Backend) -> None:
    reader, writer = await _raw(limited)
    try:
        started = time.monotonic()
        assert await asyncio.wait_for(reader.read(), PATIENCE_S) == b""  # closed, no response
        assert time.monotonic() - started >= LIMITS.request_head_timeout_s * 0.9
    finally:
        writer.close()
    assert _closed(limited) == [("http", "idle")]


async def test_headers_trickled_a_byte_at_a_time_get_408_and_a_close(
    limited: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The 408 is read only after the request below: on a loaded machine that can take longer than
    # the 2 s linger, and the trickle then meets a closed socket, whose reset the client's reader
    # reports instead of the answer it holds. The linger here outlasts the test's patience.
    monkeypatch.setattr(_server, "LINGER_S", PATIENCE_S * 2)
    reader, writer = await _raw(limited)
    head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200

    async def trickle() -> None:
        with contextlib.suppress(ConnectionError):
            for byte in head:
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(0.02)

    trickling = asyncio.create_task(trickle())
    try:
        await _healthz(limited)  # a normal request meanwhile is answered
        answer = await asyncio.wait_for(reader.read(), PATIENCE_S)
    finally:
        trickling.cancel()
        writer.close()
    status, _, rest = answer.partition(b"\r\n")
    assert status == b"HTTP/1.1 408 Request Timeout"
    headers, _, body = rest.partition(b"\r\n\r\n")
    assert b"content-type: application/problem+json" in headers
    assert json.loads(body)["code"] == "request_timeout"
    assert _closed(limited) == [("http", "slow_headers")]


async def _read_while_sending(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, every_s: float
) -> bytes:
    """Everything the server sends while the peer keeps writing a byte every `every_s`."""

    async def keep_sending() -> None:
        with contextlib.suppress(ConnectionError):
            while True:
                writer.write(b"a")
                await writer.drain()
                await asyncio.sleep(every_s)

    async def read_all() -> bytes:
        received = bytearray()
        try:
            while chunk := await reader.read(65536):
                received += chunk
        except ConnectionError as error:  # say what arrived before the reset, if anything did
            raise AssertionError(f"{error!r} after {bytes(received)[:300]!r}") from error
        return bytes(received)

    sending = asyncio.create_task(keep_sending())
    try:
        return await asyncio.wait_for(read_all(), PATIENCE_S)
    finally:
        sending.cancel()
        writer.close()


async def test_the_408_survives_a_peer_that_keeps_sending(limited: Backend) -> None:
    # Bytes still arriving when the deadline fires must not turn the answer into a reset: the
    # server shuts its write side after the 408 and drops what follows (a lingering close).
    for _ in range(5):
        reader, writer = await _raw(limited)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        answer = await _read_while_sending(reader, writer, every_s=0.0005)
        assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
        assert json.loads(answer.partition(b"\r\n\r\n")[2])["code"] == "request_timeout"
    assert _closed(limited) == [("http", "slow_headers")] * 5


async def test_a_peer_that_never_stops_sending_is_dropped_after_the_linger(
    limited: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_server, "LINGER_S", 0.3)
    reader, writer = await _raw(limited)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    await reader.readuntil(b"}")  # the whole 408 (its body is one JSON object)
    started = time.monotonic()

    async def keep_sending() -> None:
        while True:
            writer.write(b"a")
            await writer.drain()
            await asyncio.sleep(0.01)

    with pytest.raises(ConnectionError):
        await asyncio.wait_for(keep_sending(), PATIENCE_S)
    writer.close()
    assert time.monotonic() - started >= 0.3 * 0.9


async def test_a_slow_response_is_not_cut_by_the_head_deadline(limited: Backend) -> None:
    # The deadline covers the request head only: a create that waits longer than it on the
    # device (here on the manual clock, while real time passes) still gets its answer.
    await limited.device(behaviour=Behaviour(provision="silent"))
    async with limited.client(limited.api_key()) as http:
        pending = asyncio.ensure_future(
            http.post("/v1/sessions", json=unattended(), headers=idem())
        )
        await asyncio.sleep(LIMITS.request_head_timeout_s * 2)
        assert not pending.done()
        await limited.clock.advance(5)
        response = await pending
        assert response.status_code == 202, response.text
        # The same keep-alive connection serves the next request.
        assert (await http.get("/v1/devices")).status_code == 200
    assert _closed(limited) == []


async def test_a_request_head_over_the_bound_is_refused_with_400_and_a_close(
    limited: Backend,
) -> None:
    # The parser does not bound a head it streams to the server; the server does, as h11 did,
    # well before the head deadline, however the head is split into reads.
    reader, writer = await _raw(limited)
    try:
        started = time.monotonic()
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        for _ in range(_server.MAX_HEAD_BYTES // 1024 + 2):
            writer.write(b"X-Filler: " + b"a" * 1000 + b"\r\n")
            await writer.drain()
            await asyncio.sleep(0.005)  # one read each
        answer = await asyncio.wait_for(reader.read(), PATIENCE_S)
    finally:
        writer.close()
    assert answer.startswith(b"HTTP/1.1 400 ")
    _assert_invalid_request(answer)
    assert time.monotonic() - started < LIMITS.request_head_timeout_s
    assert _closed(limited) == []  # refused as invalid, not timed out


def _assert_invalid_request(answer: bytes) -> None:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"content-type: application/problem+json" in head.lower()
    assert json.loads(body)["code"] == "invalid_request"


async def test_a_whole_request_with_a_large_body_in_one_read_is_not_taken_for_a_large_head(
    limited: Backend,
) -> None:
    # Head and body in one write: the read in which the head completes also holds the body, and
    # must not count towards the head's bound (a 40 KiB body once got the parser's 400).
    body = json.dumps({"allowedOrigins": ["https://example.com"], "filler": "0" * 40_000})
    reader, writer = await _raw(limited)
    try:
        writer.write(
            b"POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body.encode()
        )
        answer = await asyncio.wait_for(reader.read(), PATIENCE_S)
    finally:
        writer.close()
    assert answer.startswith(b"HTTP/1.1 401 "), answer[:200]  # the app's answer: no credential


async def test_a_body_framed_two_ways_is_refused_before_the_app_sees_it(limited: Backend) -> None:
    reader, writer = await _raw(limited)
    try:
        writer.write(FRAMED_TWO_WAYS + b"0\r\n\r\n")
        answer = await asyncio.wait_for(reader.read(), PATIENCE_S)
    finally:
        writer.close()
    assert answer.startswith(b"HTTP/1.1 400 ")
    _assert_invalid_request(answer)


async def test_a_refused_request_gets_a_lingering_close(limited: Backend) -> None:
    # The 400 gets the same lingering close as the 408: after the answer and its FIN the server
    # still reads and drops what the peer sends. Closing at once would reset the connection, and
    # a reset that overtakes the answer hides it from the peer's reads.
    reader, writer = await _raw(limited)
    try:
        writer.write(FRAMED_TWO_WAYS)
        answer = await asyncio.wait_for(reader.read(), PATIENCE_S)  # the answer, then the FIN
        _assert_invalid_request(answer)
        for _ in range(20):  # a closed socket answers these with a reset, and drain raises
            writer.write(b"a")
            await writer.drain()
            await asyncio.sleep(0.01)
    finally:
        writer.close()
    assert _closed(limited) == []  # refused as invalid, not timed out


async def test_a_large_head_under_the_bound_is_answered(limited: Backend) -> None:
    async with httpx.AsyncClient(base_url=limited.url, timeout=PATIENCE_S) as http:
        filler = {f"x-filler-{i}": "a" * 1000 for i in range(_server.MAX_HEAD_BYTES // 1024 - 2)}
        assert (await http.get("/healthz", headers=filler)).status_code == 200


async def test_pipelined_requests_are_answered_in_order_then_idle_closes(
    limited: Backend,
) -> None:
    reader, writer = await _raw(limited)
    try:
        one = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        writer.write(one + b"GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first = await asyncio.wait_for(reader.readuntil(b"HTTP/1.1 404 "), PATIENCE_S)
        assert first.startswith(b"HTTP/1.1 200 OK\r\n")
        started = time.monotonic()
        # Both answered, the connection is kept alive, then closed once the next head is late.
        rest = await asyncio.wait_for(reader.read(), PATIENCE_S)
        assert b"\r\n\r\n" in rest
        assert time.monotonic() - started >= LIMITS.request_head_timeout_s * 0.9
    finally:
        writer.close()
    assert _closed(limited) == [("http", "idle")]


async def test_a_kept_alive_connection_is_closed_quietly_after_the_keep_alive_timeout(
    limited: Backend,
) -> None:
    # uvicorn's keep-alive timeout still closes an idle connection after an answer, before the
    # head deadline and without a `connection.closed` event (it is no limit being enforced).
    # Read by each new connection; uvicorn types it int, and any number of seconds works.
    limited.server.config.timeout_keep_alive = 0.1  # type: ignore[assignment]
    reader, writer = await _raw(limited)
    try:
        for _ in range(3):  # each answer re-arms it
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            await asyncio.wait_for(reader.readuntil(b"HTTP/1.1 200 OK\r\n"), PATIENCE_S)
            await asyncio.sleep(0.05)
        started = time.monotonic()
        await asyncio.wait_for(reader.read(), PATIENCE_S)  # the rest of the answer, then EOF
        waited = time.monotonic() - started
    finally:
        writer.close()
    assert waited < LIMITS.request_head_timeout_s
    assert _closed(limited) == []


async def _device_socket(backend: Backend, device: str = "kiosk-1") -> Any:
    credential = backend.enroll(device=device)
    async with httpx.AsyncClient(base_url=backend.url, timeout=PATIENCE_S) as http:
        response = await http.post(
            "/v1/device/connect-ticket",
            json={"browserEpoch": str(uuid.uuid4())},
            headers={"Authorization": f"Bearer {credential}"},
        )
        assert response.status_code == 200, response.text
    return await websockets.connect(response.json()["socketUrl"], open_timeout=PATIENCE_S)


async def _close_code(socket: Any) -> int:
    with contextlib.suppress(websockets.ConnectionClosed):
        async with asyncio.timeout(PATIENCE_S):
            async for _ in socket:
                pass
    code: int = socket.close_code
    return code


async def test_a_socket_that_never_says_hello_is_closed_with_4408(limited: Backend) -> None:
    silent = await _device_socket(limited, "kiosk-1")
    chatty = await _device_socket(limited, "kiosk-2")
    await chatty.send(json.dumps({"type": "heartbeat", "seq": 1, "freeCapacity": 2}))
    assert await _close_code(silent) == 4408
    assert await _close_code(chatty) == 4408  # frames other than hello do not count
    await _healthz(limited)
    assert _closed(limited) == [("device", "hello_timeout")] * 2


async def test_a_session_socket_that_never_says_hello_is_closed_with_4408(
    limited: Backend,
) -> None:
    device = await limited.device(behaviour=Behaviour(open_session_sockets=False))
    async with limited.client(limited.api_key()) as http:
        pending = asyncio.ensure_future(
            http.post("/v1/sessions", json=unattended(), headers=idem())
        )
        ticket = await device.wait_for(
            lambda: next(iter(device.frames_of(m.DeviceServerSessionTicket)), None)
        )
        session_id = str(ticket.session_id)
        await limited.until(  # the provision_ack turn: the session is connected
            lambda: limited.session_status(session_id) == "connected", "connected"
        )
        socket = await websockets.connect(
            f"{ticket.socket_url}?ticket={ticket.ticket}", open_timeout=PATIENCE_S
        )
        assert await _close_code(socket) == 4408
        await limited.clock.advance(5)
        await pending
    assert _closed(limited) == [("session", "hello_timeout")]


async def test_a_device_that_said_hello_outlives_the_hello_timeout(limited: Backend) -> None:
    device = await limited.device()
    await asyncio.sleep(LIMITS.hello_timeout_s * 2)  # real time: the limit is wall-clock
    await device.heartbeat()
    # Answered after the hello timeout passed: the socket was not closed meanwhile.
    await device.wait_for(lambda: device.frames_of(m.DeviceServerHeartbeatAck))
    assert _closed(limited) == []
    assert limited.services.device_agent("acme", "laptop-1").connected


async def test_a_frame_flood_is_closed_with_4429(limited: Backend) -> None:
    device = await limited.device()
    socket = device._socket
    with contextlib.suppress(websockets.ConnectionClosed):
        for seq in range(LIMITS.socket_frame_burst * 5):
            await socket.send(json.dumps({"type": "heartbeat", "seq": seq, "freeCapacity": 2}))
    await asyncio.wait_for(socket.wait_closed(), PATIENCE_S)
    assert socket.close_code == 4429
    assert _closed(limited) == [("device", "frame_rate")]


async def test_a_frame_over_the_size_bound_is_closed_with_1009(limited: Backend) -> None:
    device = await limited.device()
    socket = device._socket
    with contextlib.suppress(websockets.ConnectionClosed):
        await socket.send("x" * (LIMITS.max_frame_bytes + 1))
    await asyncio.wait_for(socket.wait_closed(), PATIENCE_S)
    assert socket.close_code == 1009
    await limited.until(lambda: _closed(limited), "the close is counted")
    assert _closed(limited) == [("device", "frame_too_big")]


async def test_the_default_frame_bound_fits_the_largest_screenshot_not_16_mib(
    backend: Backend,
) -> None:
    config = server_config(create_app(backend.services), backend.services)
    assert config.ws_max_size == MAX_FRAME_BYTES
    assert MAX_SCREENSHOT_CHARS < MAX_FRAME_BYTES < 16 * 1024 * 1024
    # A frame just over the bound is refused by the running server too.
    device = await backend.device()
    socket = device._socket
    with contextlib.suppress(websockets.ConnectionClosed):
        await socket.send("x" * (MAX_FRAME_BYTES + 1))
    await asyncio.wait_for(socket.wait_closed(), PATIENCE_S)
    assert socket.close_code == 1009


async def test_the_slow_client_load_of_the_benchmark_is_refused_while_healthz_answers(
    limited: Backend,
) -> None:
    # A fixed slice of bench/connection_limits.py: what the limits do, not how fast.
    devices = {f"slow-{i}": limited.enroll(device=f"slow-{i}") for i in range(2)}
    clients = SlowClients("127.0.0.1", limited.settings.port, 3, devices, trickle_interval_s=0.05)
    connection = HttpConnection("127.0.0.1", limited.settings.port)
    try:
        await clients.start()
        # 40 samples every 50 ms: 2 s, four times the limits, so every slow client meets them.
        _, statuses = await healthz_latencies(connection, 40, pace_ms=50)
    finally:
        await clients.stop()
        await connection.close()
    assert statuses == {200: 40}
    assert clients.counts["trickle_408"] >= 3
    assert clients.counts["trickle_other_reply"] == 0
    assert clients.close_codes[4408] >= 2
    assert set(clients.close_codes) == {4408}
    closed = _closed(limited)
    assert closed.count(("http", "slow_headers")) >= clients.counts["trickle_408"]
    assert closed.count(("device", "hello_timeout")) >= 2
