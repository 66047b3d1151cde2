"""Content-free telemetry: pseudonyms, allow-lists, JSON lines and Prometheus text."""

from __future__ import annotations

import asyncio
import enum
import io
import json
import math
from typing import TYPE_CHECKING

import pytest

from understudy import _telemetry
from understudy._security import Keys, pseudonym
from understudy._telemetry import Telemetry, TelemetryFieldError

if TYPE_CHECKING:
    from pathlib import Path

TENANT = "acme-corp-tenant"
DEVICE = "laptop-of-the-ops-team"
SESSION = "0b0f6a2e-3f5c-4a51-9d6e-7a1b2c3d4e5f"


@pytest.fixture
def keys() -> Keys:
    return Keys.from_master(b"t" * 32)


def test_emitted_line_carries_pseudonyms_and_never_raw_ids(keys: Keys) -> None:
    sink = io.StringIO()
    telemetry = Telemetry(sink, keys, clock=lambda: 1_800_000_000.25)
    telemetry.emit(
        "lifecycle.transition",
        tenant=TENANT,
        device=DEVICE,
        session=SESSION,
        from_state="provisioning",
        to_state="connected",
    )
    line = sink.getvalue()
    assert line.endswith("\n")
    assert line.count("\n") == 1
    for raw in (TENANT, DEVICE, SESSION):
        assert raw not in line
    record = json.loads(line)
    assert record == {
        "ts": "2027-01-15T08:00:00.250+00:00",
        "event": "lifecycle.transition",
        "tenant": pseudonym(keys, "tenant", TENANT),
        "device": pseudonym(keys, "device", DEVICE),
        "session": pseudonym(keys, "session", SESSION),
        "from_state": "provisioning",
        "to_state": "connected",
    }


def test_raw_url_field_is_refused(keys: Keys) -> None:
    telemetry = Telemetry(None, keys)
    with pytest.raises(TelemetryFieldError, match="'url' is not allowed"):
        telemetry.emit("command.outcome", url="https://example.com/account")
    assert telemetry.events == []


@pytest.mark.parametrize(
    "value",
    [
        "https://example.com/account",
        "ws://127.0.0.1:8787/v1/device/socket?ticket=ust1.x.y",
        "Inbox (3) - Mail",
        "x" * 65,
        "",
    ],
)
def test_content_in_a_plain_field_is_refused_without_echoing_it(keys: Keys, value: str) -> None:
    telemetry = Telemetry(None, keys)
    with pytest.raises(TelemetryFieldError) as caught:
        telemetry.emit("command.outcome", reason=value)
    assert value not in str(caught.value) or value == ""


def test_unknown_event_is_refused(keys: Keys) -> None:
    with pytest.raises(TelemetryFieldError, match=r"unknown telemetry event 'page\.viewed'"):
        Telemetry(None, keys).emit("page.viewed")


def test_identity_fields_take_non_empty_strings(keys: Keys) -> None:
    with pytest.raises(TelemetryFieldError):
        Telemetry(None, keys).emit("auth.accepted", tenant=7)
    with pytest.raises(TelemetryFieldError):
        Telemetry(None, keys).emit("auth.accepted", tenant="")


def test_in_memory_events_keep_numbers_and_booleans(keys: Keys) -> None:
    telemetry = Telemetry(None, keys)
    telemetry.emit("command.outcome", command="click", latency_ms=42, outcome="ok", count=1)
    telemetry.emit("quota.decision", scope="commands_per_session", outcome=False)
    first, second = telemetry.events
    assert first["latency_ms"] == 42
    assert first["command"] == "click"
    assert second["outcome"] is False


def test_path_sink_appends_one_json_line_per_event(keys: Keys, tmp_path: Path) -> None:
    path = tmp_path / "telemetry.jsonl"
    telemetry = Telemetry(path, keys)
    telemetry.emit("device.connected", device=DEVICE, protocol_version=2)
    telemetry.emit("device.disconnected", device=DEVICE, reason="socket_closed")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["event"] for line in lines] == [
        "device.connected",
        "device.disconnected",
    ]
    assert DEVICE not in path.read_text(encoding="utf-8")
    assert telemetry.events == []
    telemetry.close()


def test_path_sink_follows_rotation(
    keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_telemetry, "_REOPEN_CHECK_S", 0.0)  # compare the path on every event
    path = tmp_path / "telemetry.jsonl"
    telemetry = Telemetry(path, keys)
    telemetry.emit("device.connected", device=DEVICE, protocol_version=2)
    path.rename(tmp_path / "telemetry.jsonl.1")  # logrotate's default: rename, then new file
    telemetry.emit("device.disconnected", device=DEVICE, reason="socket_closed")
    path.unlink()  # removed outright
    telemetry.emit("device.connected", device=DEVICE, protocol_version=2)
    telemetry.close()
    rotated = (tmp_path / "telemetry.jsonl.1").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["event"] for line in rotated] == ["device.connected"]
    current = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["event"] for line in current] == ["device.connected"]


def test_observers_see_each_record_after_pseudonyms_and_checks(keys: Keys) -> None:
    telemetry = Telemetry(None, keys)
    seen: list[dict[str, _telemetry.FieldValue]] = []
    telemetry.observe(seen.append)
    telemetry.emit("auth.accepted", outcome="ok", tenant=TENANT)
    with pytest.raises(TelemetryFieldError):
        telemetry.emit("command.outcome", outcome="ok", title="Secret page")
    assert [r["event"] for r in seen] == ["auth.accepted"]
    assert seen[0]["tenant"] == pseudonym(keys, "tenant", TENANT)


def test_refused_event_is_not_counted(keys: Keys) -> None:
    telemetry = Telemetry(None, keys)
    with pytest.raises(TelemetryFieldError):
        telemetry.emit("command.outcome", outcome="ok", title="Secret page")
    assert telemetry.counter("command.outcome", "ok") == 0


class _Kind(enum.StrEnum):
    WRITE = "write"


class _Level(enum.IntEnum):
    HIGH = 3


def test_each_line_is_the_json_of_its_record_in_the_order_it_always_had(keys: Keys) -> None:
    # Lines are written from parts kept per checked value; each must still be exactly what
    # json.dumps made of the record: ts, event, then the fields sorted by name.
    sink = io.StringIO()
    telemetry = Telemetry(sink, keys, clock=lambda: 1_800_000_000.25)
    for latency in (7, 8):  # the second event takes the kept parts
        telemetry.emit(
            "command.outcome",
            session=SESSION,
            command="click",
            outcome="succeeded",
            kind=_Kind.WRITE,
            latency_ms=latency,
            count=_Level.HIGH,
            scope=True,
            tenant=TENANT,
        )
    lines = sink.getvalue().splitlines()
    assert len(lines) == 2
    for line, latency in zip(lines, (7, 8), strict=True):
        expected = {
            "ts": "2027-01-15T08:00:00.250+00:00",
            "event": "command.outcome",
            "command": "click",
            "count": 3,
            "kind": "write",
            "latency_ms": latency,
            "outcome": "succeeded",
            "scope": True,
            "session": pseudonym(keys, "session", SESSION),
            "tenant": pseudonym(keys, "tenant", TENANT),
        }
        assert line == json.dumps(expected, separators=(",", ":"), ensure_ascii=False)


def test_a_value_checked_for_one_field_is_checked_again_for_another(keys: Keys) -> None:
    telemetry = Telemetry(None, keys)
    raw_id = "Laptop of the ops team"  # any string is an id; as a plain value it is prose
    telemetry.emit("device.connected", device=raw_id)
    telemetry.emit("device.connected", device=raw_id)  # kept: its pseudonym again
    with pytest.raises(TelemetryFieldError, match="short machine code"):
        telemetry.emit("device.connected", reason=raw_id)
    telemetry.emit("device.connected", kind="consumer")
    with pytest.raises(TelemetryFieldError, match="'title' is not allowed"):
        telemetry.emit("device.connected", title="consumer")
    assert [event.get("device") for event in telemetry.events] == [
        pseudonym(keys, "device", raw_id),
        pseudonym(keys, "device", raw_id),
        None,
    ]


def test_timestamps_follow_the_clock_across_seconds_to_the_millisecond(keys: Keys) -> None:
    instants = iter([1_800_000_000.999, 1_800_000_000.9995, 1_800_000_001.0, 1_800_000_061.007])
    telemetry = Telemetry(None, keys, clock=lambda: next(instants))
    for _ in range(4):
        telemetry.emit("auth.accepted")
    assert [event["ts"] for event in telemetry.events] == [
        "2027-01-15T08:00:00.999+00:00",
        "2027-01-15T08:00:00.999+00:00",
        "2027-01-15T08:00:01.000+00:00",
        "2027-01-15T08:01:01.007+00:00",
    ]


class _CountingSink(io.StringIO):
    """A text sink that counts its flushes: each is one write to a file sink."""

    def __init__(self) -> None:
        super().__init__()
        self.flushes = 0
        self.flushed = ""  # what had been written at the last flush

    def flush(self) -> None:
        self.flushes += 1
        self.flushed = self.getvalue()
        super().flush()


async def test_events_of_several_loop_iterations_within_the_interval_are_one_write(
    keys: Keys,
) -> None:
    sink = _CountingSink()
    telemetry = Telemetry(sink, keys)
    for kind in ("read", "write", "read"):  # a command's events, a loop iteration apart
        telemetry.emit("command.admitted", tenant=TENANT, session=SESSION, kind=kind)
        await asyncio.sleep(0)
    telemetry.emit("command.outcome", tenant=TENANT, session=SESSION, outcome="succeeded")
    assert sink.flushes == 0  # nothing written yet: the interval has not passed

    await asyncio.sleep(_telemetry.FLUSH_INTERVAL_S * 2)  # a loop timer after the flush's
    assert sink.flushes == 1
    lines = [json.loads(line) for line in sink.flushed.splitlines()]
    assert [line.get("kind", line["event"]) for line in lines] == [
        "read",
        "write",
        "read",
        "command.outcome",
    ]


async def test_a_rotated_sink_gets_its_lines_before_the_new_file_does(
    keys: Keys, tmp_path: Path
) -> None:
    path = tmp_path / "telemetry.jsonl"
    telemetry = Telemetry(path, keys)
    telemetry.emit("command.admitted", tenant=TENANT, session=SESSION, kind="read")
    path.rename(tmp_path / "telemetry.1.jsonl")
    telemetry._checked_at = -math.inf  # the next event compares the path with the open file
    telemetry.emit("command.admitted", tenant=TENANT, session=SESSION, kind="write")
    # The old file was flushed when the new one took its first line, before any interval.
    assert json.loads((tmp_path / "telemetry.1.jsonl").read_text())["kind"] == "read"
    telemetry.close()
    assert json.loads(path.read_text())["kind"] == "write"
