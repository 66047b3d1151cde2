"""Content-free operational telemetry: JSON lines, in-memory counts, and observers (`/metrics`).

Callers pass identifiers (tenant, device, session, actor, credential) raw; this module replaces
each with a keyed, domain-separated pseudonym before anything is stored or written, so no call
site can forget to. Every event name and field name is on an allow-list, and plain string values
must be short machine codes, so a URL, a title, a ref, a secret reference, a token, a ticket or a
socket URL cannot reach the sink by accident: trying raises :class:`TelemetryFieldError`, a
programming error.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import re
import time
from collections import deque
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Final, TextIO

from understudy._security import Keys, pseudonym

if TYPE_CHECKING:
    from collections.abc import Callable

EVENTS: Final = frozenset(
    {
        "auth.accepted",
        "auth.refused",
        "allocation.granted",
        "allocation.refused",
        "lifecycle.transition",
        "quota.decision",
        "ticket.minted",
        "ticket.refused",
        "ticket.consumed",
        "device.connected",
        "device.disconnected",
        "device.offline",
        "device.health",
        "command.admitted",
        "command.outcome",
        "dialog.recorded",
        "connection.closed",
        "navigation.blocked",
    }
)
IDENTITY_FIELDS: Final = frozenset({"tenant", "device", "session", "actor", "credential"})
PLAIN_FIELDS: Final = frozenset(
    {
        "outcome",
        "reason",
        "from_state",
        "to_state",
        "mode",
        "status",
        "code",
        "scope",
        "command",
        "kind",
        "count",
        "latency_ms",
        "protocol_version",
    }
)
# uvicorn's loggers; the websockets protocol inside uvicorn logs on "uvicorn.error" too.
SERVER_LOGGERS: Final = ("uvicorn.error", "uvicorn.access")
_FRAME_LINE = re.compile(r"[<>] (TEXT|BINARY|CONT) ")
_LOG_SCRUBS: Final = (
    (re.compile(r"\bust1\.[A-Za-z0-9_.-]+"), "<ticket>"),
    (re.compile(r"\b(?:usk|udc|uop)_[A-Za-z0-9_-]{43}"), "<token>"),
    (re.compile(r"\?[^\s\"']*"), "?<query>"),
    (re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s\"']+"), "<url>"),
    (re.compile(r"\b[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\b"), "<id>"),
    (re.compile(r"\b[0-9a-fA-F]{64}\b"), "<digest>"),
)
# Machine codes only: no "/", ":", "?", "@" or spaces, so neither URLs nor prose fit.
_CODE = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_MEMORY_EVENTS: Final = 10_000
_PSEUDONYM_CACHE: Final = 100_000  # ids seen recently; cleared whole when full
_REOPEN_CHECK_S: Final = 1.0
# Lines reach the sink at most this long after their event: the events of one command (its
# admission, its outcome, ...) come a few loop iterations apart, and one flush (one write to the
# file) for all of them, rather than one each, is what a crash can lose.
FLUSH_INTERVAL_S: Final = 0.01

FieldValue = str | int | bool


class TelemetryFieldError(ValueError):
    """An event or field is not on the allow-list, or a value is not content-free."""


class Telemetry:
    """Content-free event sink with in-memory counters.

    Args:
        sink: A text stream, a file to append to, or None to keep the latest events in memory
            (``events``) for tests.
        keys: Derived keys; the telemetry key makes the pseudonyms.
        clock: Wall clock for the ``ts`` field.
    """

    def __init__(
        self,
        sink: TextIO | Path | None,
        keys: Keys,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._sink = sink
        self._keys = keys
        self._clock = clock
        self._memory: deque[dict[str, FieldValue]] = deque(maxlen=_MEMORY_EVENTS)
        self._stream: TextIO | None = None  # the open sink file, when the sink is a path
        self._stream_id: tuple[int, int] | None = None  # its (device, inode)
        self._checked_at = -math.inf  # when the sink path was last compared with the stream
        # (field, string) -> its recorded value and line part, for strings already checked
        self._parts: dict[tuple[str, str], tuple[str, str]] = {}
        self._unflushed: TextIO | None = None  # the stream written since the last flush
        self._ts_millis = -1  # the millisecond `_ts_text` formats
        self._ts_second = -1  # the second `_ts_date` formats
        self._ts_date = ""
        self._ts_text = ""
        self._ts_head = ""
        self._counters: dict[tuple[str, str], int] = {}
        self._observers: list[Callable[[dict[str, FieldValue]], None]] = []

    @property
    def events(self) -> list[dict[str, FieldValue]]:
        """The latest events written when there is no sink (empty otherwise)."""
        return list(self._memory)

    def emit(self, event: str, **fields: FieldValue) -> None:
        """Record one event.

        Raises:
            TelemetryFieldError: unknown event or field, or a value that is not content-free.
        """
        if event not in EVENTS:
            raise TelemetryFieldError(f"unknown telemetry event {event!r}; add it to EVENTS first")
        head = self._head()
        record: dict[str, FieldValue] = {"ts": self._ts_text, "event": event}
        parts = [head, event, '"']
        known = self._parts
        for name, value in sorted(fields.items()):
            # Inline for the strings already checked: most fields of most events.
            kept = known.get((name, value)) if isinstance(value, str) else None
            clean, part = kept if kept is not None else self._clean(name, value)
            record[name] = clean
            parts.append(part)
        outcome = record.get("outcome", "")
        key = (event, str(outcome).lower() if isinstance(outcome, bool) else str(outcome))
        self._counters[key] = self._counters.get(key, 0) + 1
        for observer in self._observers:
            observer(record)
        sink = self._sink
        if sink is None:
            self._memory.append(record)
            return
        parts.append("}\n")
        self._write(sink, "".join(parts))

    def _head(self) -> str:
        """The line up to the event's name: `{"ts":"…","event":"`, with `ts` in ISO 8601 to the
        millisecond (what `datetime.isoformat` writes in UTC), its date and time formatted once
        a second (the events of one command mostly share them)."""
        millis = int(self._clock() * 1000)
        if millis != self._ts_millis:
            self._ts_millis = millis
            second, milli = divmod(millis, 1000)
            if second != self._ts_second:
                self._ts_second = second
                self._ts_date = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
            self._ts_text = f"{self._ts_date}.{milli:03d}+00:00"
            self._ts_head = f'{{"ts":"{self._ts_text}","event":"'
        return self._ts_head

    def observe(self, observer: Callable[[dict[str, FieldValue]], None]) -> None:
        """Call `observer` with every record, after pseudonyms and checks (the metrics use it)."""
        self._observers.append(observer)

    def _clean(self, name: str, value: FieldValue) -> tuple[FieldValue, str]:
        """The value `name` is recorded with, and its `,"name":value` part of the JSON line.

        A string's part is kept once checked (an identity's is its pseudonym's): every event of
        a command names the same tenant, session and command.
        """
        if isinstance(value, str):
            known = self._parts.get((name, value))
            if known is not None:
                return known
        if name in IDENTITY_FIELDS:
            if not isinstance(value, str) or not value:
                raise TelemetryFieldError(f"telemetry field {name!r} takes a non-empty string id")
            return self._keep(name, value, pseudonym(self._keys, name, value))
        if name not in PLAIN_FIELDS:
            raise TelemetryFieldError(
                f"telemetry field {name!r} is not allowed; allowed: "
                f"{sorted(IDENTITY_FIELDS | PLAIN_FIELDS)}"
            )
        if isinstance(value, str):
            if not _CODE.fullmatch(value):
                # The value itself is left out of the message: it may be the content we keep out.
                raise TelemetryFieldError(
                    f"telemetry field {name!r} takes a short machine code ([A-Za-z0-9_.-], at "
                    "most 64)"
                )
            return self._keep(name, value, value)
        if not isinstance(value, int):  # bool is an int
            raise TelemetryFieldError(f"telemetry field {name!r} takes a string, int or bool")
        # What json.dumps writes for a bool and for an int (or an IntEnum's value).
        number = ("true" if value else "false") if isinstance(value, bool) else int.__repr__(value)
        return value, f',"{name}":{number}'

    def _keep(self, name: str, value: str, clean: str) -> tuple[str, str]:
        if len(self._parts) >= _PSEUDONYM_CACHE:
            self._parts.clear()
        # Names come from the allow-lists and values are codes or hex pseudonyms, so nothing
        # needs escaping; json.dumps writes the value as the JSON sink always has.
        known = self._parts[(name, value)] = (
            clean,
            f',"{name}":{json.dumps(clean, ensure_ascii=False)}',
        )
        return known

    def _write(self, sink: TextIO | Path, line: str) -> None:
        stream = self._path_stream(sink) if isinstance(sink, Path) else sink
        stream.write(line)
        if self._unflushed is stream:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (the CLI): at once
            stream.flush()
            return
        # One flush (one write to the file) for every event of the next `FLUSH_INTERVAL_S`: a
        # command reports several, a few loop iterations apart, each a system call otherwise.
        self._flush()  # another stream's lines (before a rotation) first: lines keep their order
        self._unflushed = stream
        loop.call_later(FLUSH_INTERVAL_S, self._flush)

    def _flush(self) -> None:
        stream, self._unflushed = self._unflushed, None
        if stream is not None and not stream.closed:
            stream.flush()

    def _path_stream(self, path: Path) -> TextIO:
        """The open sink file, reopened when an operator has moved or removed it (rotation).

        The path is compared with the open file at most once a second, so a rotated file gets
        at most a second of lines after its rename, and no event costs an open and a close.
        """
        now = time.monotonic()
        if self._stream is not None and now - self._checked_at < _REOPEN_CHECK_S:
            return self._stream
        self._checked_at = now
        try:
            current = path.stat()
            same = self._stream_id == (current.st_dev, current.st_ino)
        except FileNotFoundError:
            same = False
        if self._stream is None or not same:
            self.close()
            self._stream = path.open("a", encoding="utf-8")
            opened = os.fstat(self._stream.fileno())
            self._stream_id = (opened.st_dev, opened.st_ino)
        return self._stream

    def close(self) -> None:
        """Close the sink file, if one is open (the next event reopens it)."""
        self._flush()
        stream, self._stream, self._stream_id = self._stream, None, None
        if stream is not None:
            stream.close()

    def counter(self, event: str, outcome: str = "") -> int:
        """Return how many ``event`` events with this ``outcome`` were emitted."""
        return self._counters.get((event, outcome), 0)


class ServerLogFilter(logging.Filter):
    """Keep the web server's own log lines content-free.

    uvicorn logs every request and socket handshake with its path and query string, which hold
    session ids and socket tickets; at DEBUG the websockets protocol also logs handshake headers
    (the page ``Origin``) and frame payloads (ids, origins, tickets). Frame payload lines are
    dropped; every other line has tickets, tokens, query strings, URLs, UUIDs and digests replaced
    by placeholders.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # unformattable: nothing safe to show
            return False
        if _FRAME_LINE.match(message):
            return False
        # Scrub the arguments one by one: uvicorn's access formatter unpacks them.
        if isinstance(record.msg, str):
            record.msg = _scrub(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_scrub_arg(arg) for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {key: _scrub_arg(arg) for key, arg in record.args.items()}
        if record.exc_info and not record.exc_text:
            record.exc_text = _scrub(logging.Formatter().formatException(record.exc_info))
        return True


def install_server_log_filter() -> None:
    """Attach :class:`ServerLogFilter` to uvicorn's loggers once per process."""
    for name in SERVER_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, ServerLogFilter) for f in logger.filters):
            logger.addFilter(ServerLogFilter())


def _scrub_arg(arg: object) -> object:
    if isinstance(arg, int | float):  # bool is an int
        return arg
    return _scrub(str(arg))


def _scrub(text: str) -> str:
    for pattern, placeholder in _LOG_SCRUBS:
        text = pattern.sub(placeholder, text)
    return text
