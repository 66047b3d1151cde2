"""Where a governed write spends its time: one timeline per command across the three processes.

Stamps, all on this machine's wall clock:

- the load generator: the request written and the reply read (``time.time()``);
- the server: ``admitted_at`` (start of the admission turn) and ``completed_at`` (start of the
  turn that persists the outcome), from the command's SQLite row;
- the extension's service worker: each session-socket frame sent or handed to its ``onmessage``
  handler (``write_prepare``, ``write_ready``, ``write_grant``, ``result``), and the start and end
  of every ``chrome.debugger.sendCommand``, ``chrome.storage.session`` write and ``chrome.tabs.get``
  (``performance.timeOrigin + performance.now()``).

- with a wiretapped server (``bench._wiretap_serve``), the server's side of every crossing: the
  request parsed, each socket frame read whole or handed to the kernel, the reply handed to the
  kernel. Each crossing between the processes then splits into the server's part (its turns,
  commits and serialisation, from reading a frame to writing the next) and the sockets' part
  (the kernel, and Chromium's delivery between its network service and the worker).

The "of which" parts of the extension's execution are sums of call durations. Calls that overlap
(during a navigation, ``Fetch.continueRequest`` and the storage writes of the new document run
while ``Page.navigate`` and the wait for ``load`` are pending) make "the rest" a lower bound.

The service-worker stamps come from wrappers installed by ``Runtime.evaluate`` over a DevTools
connection to the worker, opened only to install them and to read them back (closed while the
commands run). The wrappers live in the running worker's memory, not in the extension's files,
and see only the session created after they were installed (its socket is built by the wrapped
``WebSocket``); they keep the frame type and command id, never a frame's content. The worker's
clock is matched to the load generator's by a few ``Runtime.evaluate`` round trips (the one with
the shortest round trip wins; its half round trip bounds the error, reported).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import sqlite3
import time
from typing import TYPE_CHECKING, Any, Final

import websockets

from bench._report import fmt
from bench._stats import summary

if TYPE_CHECKING:
    from pathlib import Path

    from bench._chromium import Rig

# Installs the wrappers once per worker; answers which of them took.
INSTALL: Final = r"""(() => {
  if (globalThis.__benchTrace !== undefined) return {already: true};
  const trace = [];
  globalThis.__benchTrace = trace;
  const now = () => performance.timeOrigin + performance.now();
  const TYPE = /"type":"([a-z_]+)"/;
  const ID = /"commandId":"([0-9a-f-]{36})"/;
  const frame = (kind, data) => {
    if (typeof data !== "string") return;
    const head = data.slice(0, 512);
    const type = TYPE.exec(head);
    const id = ID.exec(head);
    const at = now();
    trace.push([kind, type === null ? "?" : type[1], id === null ? null : id[1], at, at]);
  };
  const Base = globalThis.WebSocket;
  globalThis.WebSocket = class extends Base {
    constructor(...args) {
      super(...args);
      const at = now();
      trace.push(["socket", "new", null, at, at]);
      this.addEventListener("open", () => {
        const opened = now();
        trace.push(["socket", "open", null, opened, opened]);
      });
    }
    send(data) {
      frame("send", data);
      return super.send(data);
    }
    set onmessage(handler) {
      super.onmessage = handler === null ? null : (event) => {
        frame("recv", event.data);
        return handler(event);
      };
    }
    get onmessage() {
      return super.onmessage;
    }
  };
  const wrapped = {};
  const wrap = (object, name, kind, label) => {
    const original = object[name];
    const timed = async function (...args) {
      const start = now();
      try {
        return await original.apply(object, args);
      } finally {
        trace.push([kind, label(args), null, start, now()]);
      }
    };
    object[name] = timed;
    wrapped[`${kind}.${name}`] = object[name] === timed;
  };
  wrap(chrome.debugger, "sendCommand", "cdp", (args) => String(args[1]));
  wrap(chrome.debugger, "attach", "attach", () => "debugger.attach");
  wrap(chrome.windows, "create", "windows", () => "windows.create");
  wrap(chrome.storage.session, "get", "storage", () => "session.get");
  // The key's kind only (journal, leases, outbox, spareWindow), never a session id.
  wrap(chrome.storage.session, "set", "storage", (args) =>
    `session.set ${Object.keys(args[0] ?? {}).map((k) => k.split(":")[0]).join(",")}`);
  wrap(chrome.storage.session, "remove", "storage", () => "session.remove");
  wrap(chrome.tabs, "get", "tabs", () => "tabs.get");
  // A listener of our own (the extension's was added before this ran): when Chromium fired each
  // main-frame load event, for the time a navigation waits on the browser after Page.navigate.
  chrome.debugger.onEvent.addListener((source, method, params) => {
    if (method !== "Page.lifecycleEvent" || params === undefined || params.name !== "load") return;
    const at = now();
    trace.push(["event", "load", null, at, at]);
  });
  wrapped.WebSocket = globalThis.WebSocket !== Base;
  return wrapped;
})()"""
READ: Final = (
    "JSON.stringify(globalThis.__benchTrace === undefined ? null : "
    "globalThis.__benchTrace.splice(0))"
)
NOW: Final = "performance.timeOrigin + performance.now()"
CALIBRATION_ROUNDS: Final = 7

# The hops of a write, in order; each is the difference of two stamps (see module docstring).
HOPS: Final = [
    ("http_to_admission", "client -> admission turn (HTTP, auth, checks)"),
    ("admission_to_prepare", "admission commit -> write_prepare at the extension"),
    ("extension_prepare", "extension: journal 'prepared' -> write_ready sent"),
    ("ready_to_grant", "write_ready -> write_grant at the extension (server turn, commit)"),
    ("extension_execute", "extension: write_grant -> result sent"),
    ("result_to_outcome", "result -> outcome turn in the server"),
    ("outcome_to_reply", "outcome turn (commit) -> HTTP reply at the client"),
]
# With a wiretapped server, the parts of each crossing (key of the hop -> its rows): "server" is
# from a frame or request read whole to the next frame or reply handed to the kernel; "sockets"
# the rest (kernel, Chromium's network service and its delivery to the worker, the client).
WIRE_PARTS: Final = {
    "http_to_admission": [
        ("wire_request", "  sockets: request written -> parsed by the server"),
        ("server_admit", "  server: parsed -> admission turn"),
    ],
    "admission_to_prepare": [
        ("server_prepare", "  server: admission turn, commit -> write_prepare written"),
        ("wire_prepare", "  sockets: written -> write_prepare at the extension"),
    ],
    "ready_to_grant": [
        ("wire_ready", "  sockets: write_ready sent -> read by the server"),
        ("server_grant", "  server: read -> turn, commit -> write_grant written"),
        ("wire_grant", "  sockets: written -> write_grant at the extension"),
    ],
    "result_to_outcome": [
        ("wire_result", "  sockets: result sent -> read by the server"),
        ("server_outcome", "  server: read -> outcome turn"),
    ],
    "outcome_to_reply": [
        ("server_reply", "  server: outcome turn, commit -> reply written"),
        ("wire_reply", "  sockets: reply written -> read by the client"),
    ],
}
# The 'elsewhere' part of the overhead, split the same way (wiretapped server only).
ELSEWHERE_PARTS: Final = [
    ("elsewhere_server", "    server: request parsed -> reply written, less the extension's time"),
    ("elsewhere_sockets", "    sockets: HTTP both ways, four frames with Chromium's delivery"),
]
# What the extension's execution window (write_grant -> result) is made of.
EXECUTE_PARTS: Final = [
    ("execute_cdp", "  of which chrome.debugger.sendCommand"),
    ("execute_storage", "  of which chrome.storage.session writes"),
    ("execute_tabs", "  of which chrome.tabs.get"),
    ("execute_other", "  of which the rest (queue, JS, waiting for events)"),
]
# A navigation's time after Chromium reported the new document's load (navigate only).
AFTER_LOAD: Final = [
    ("after_load", "navigate: load event -> result sent"),
    ("after_load_browser", "  of which under sendCommand (the rest of the settle round trip)"),
]
# The overhead of a governed write (issue 19, target 1): the round trip minus the browser's time.
OVERHEAD: Final = [
    ("browser", "browser time: a sendCommand pending, or waiting for Chromium's load event"),
    ("overhead_strict", "round trip - time under chrome.debugger.sendCommand"),
    ("overhead", "overhead: round trip - browser time"),
    ("overhead_extension", "  of which in the extension (prepare, and execute - browser time)"),
    ("overhead_elsewhere", "  of which elsewhere (HTTP, server turns and commits, sockets)"),
]
_ids = itertools.count(1)


class WorkerConsole:
    """One DevTools connection to the extension's service worker (``Runtime.evaluate`` only)."""

    def __init__(self, connection: Any) -> None:
        self._ws = connection

    async def evaluate(self, expression: str) -> Any:
        ident = next(_ids)
        params = {"expression": expression, "awaitPromise": True, "returnByValue": True}
        request = {"id": ident, "method": "Runtime.evaluate", "params": params}
        await self._ws.send(json.dumps(request))
        while True:
            message = json.loads(await asyncio.wait_for(self._ws.recv(), timeout=15))
            if message.get("id") != ident:
                continue
            if "error" in message:
                raise RuntimeError(f"Runtime.evaluate failed: {message['error']}")
            result = message["result"]
            if "exceptionDetails" in result:
                raise RuntimeError(f"evaluate threw: {result['exceptionDetails'].get('text')}")
            return result["result"].get("value")

    async def clock_offset_ms(self) -> tuple[float, float]:
        """(worker clock - load generator clock, half of the best round trip), in ms."""
        best: tuple[float, float] | None = None
        for _ in range(CALIBRATION_ROUNDS):
            before = time.time() * 1000
            remote = float(await self.evaluate(NOW))
            after = time.time() * 1000
            half = (after - before) / 2
            if best is None or half < best[1]:
                best = (remote - (before + half), half)
        assert best is not None  # noqa: S101 - CALIBRATION_ROUNDS > 0
        return best


async def open_worker(rig: Rig) -> tuple[WorkerConsole, Any]:
    """A console on the extension's service worker, and the connection to close afterwards."""
    from bench._chromium import EXTENSION_ORIGIN

    deadline = time.monotonic() + 15
    while True:
        workers = [
            t
            for t in await rig.browser.devtools.targets()
            if t.type == "service_worker" and t.url.startswith(EXTENSION_ORIGIN)
        ]
        if workers:
            break
        if time.monotonic() > deadline:
            raise RuntimeError("the extension's service worker is not running")
        await asyncio.sleep(0.2)
    connection = await websockets.connect(workers[0].ws_url, max_size=None, open_timeout=5)
    return WorkerConsole(connection), connection


async def install(rig: Rig) -> dict[str, Any]:
    """Install the wrappers; returns which took and the clock offset before the commands."""
    console, connection = await open_worker(rig)
    try:
        wrapped: dict[str, Any] = await console.evaluate(INSTALL)
        if not wrapped.get("already") and not all(wrapped.values()):
            raise RuntimeError(f"the service worker refused a timing wrapper: {wrapped}")
        offset, error = await console.clock_offset_ms()
    finally:
        await connection.close()
    return {"wrapped": wrapped, "offset_ms": offset, "offset_error_ms": error}


async def collect(rig: Rig) -> tuple[list[list[Any]], float, float]:
    """The trace recorded since the last read, and the clock offset measured now."""
    console, connection = await open_worker(rig)
    try:
        raw = await console.evaluate(READ)
        if raw is None:
            raise RuntimeError("the service worker restarted: its timing wrappers are gone")
        offset, error = await console.clock_offset_ms()
    finally:
        await connection.close()
    trace: list[list[Any]] = json.loads(raw)
    return trace, offset, error


# A wiretapped server's stamps of one write, in the order they happen (``wire_stamps`` keys).
CROSSINGS: Final = (
    "http_in",
    "ws_out write_prepare",
    "ws_in write_ready",
    "ws_out write_grant",
    "ws_in result",
    "http_out",
)


def wire_stamps(record: list[list[Any]]) -> dict[tuple[str, str], float]:
    """(kind and frame type, command id) -> the first such stamp (ms) of a wiretapped server's
    record (``bench._wiretap_serve``); kinds ``http_in`` and ``http_out`` carry no type."""
    stamps: dict[tuple[str, str], float] = {}
    for kind, frame_type, command_id, at in record:
        if command_id is None:
            continue
        key = kind if kind.startswith("http") else f"{kind} {frame_type}"
        stamps.setdefault((key, command_id), at)
    return stamps


def _wire_parts(
    wire: dict[tuple[str, str], float],
    command_id: str,
    sent: float,
    replied: float,
    admitted: float,
    completed: float,
    frames: tuple[float, float, float, float],
) -> dict[str, float]:
    """The server's and the sockets' parts of each crossing (``WIRE_PARTS``), or nothing when a
    stamp of the wiretapped server is missing."""
    found: list[float] = []
    for name in CROSSINGS:
        at = wire.get((name, command_id))
        if at is None:
            return {}
        found.append(at)
    request, prepare_out, ready_in, grant_out, result_in, reply_out = found
    prepare, ready, grant, result = frames
    parts = {
        "wire_request": request - sent,
        "server_admit": admitted - request,
        "server_prepare": prepare_out - admitted,
        "wire_prepare": prepare - prepare_out,
        "wire_ready": ready_in - ready,
        "server_grant": grant_out - ready_in,
        "wire_grant": grant - grant_out,
        "wire_result": result_in - result,
        "server_outcome": completed - result_in,
        "server_reply": reply_out - completed,
        "wire_reply": replied - reply_out,
    }
    parts["elsewhere_server"] = sum(v for k, v in parts.items() if k.startswith("server_"))
    parts["elsewhere_sockets"] = sum(v for k, v in parts.items() if k.startswith("wire_"))
    return parts


def server_stamps(db_path: Path, session_id: str, ids: list[str]) -> dict[str, tuple[float, float]]:
    """command id -> (admitted_at, completed_at) in ms of the server's wall clock."""
    connection = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        stamps = {}
        for command_id in ids:
            row = connection.execute(
                "SELECT admitted_at, completed_at FROM commands "
                "WHERE session_id = ? AND command_id = ?",
                (session_id, command_id),
            ).fetchone()
            if row is not None and row[1] is not None:
                stamps[command_id] = (row[0] * 1000, row[1] * 1000)
        return stamps
    finally:
        connection.close()


def breakdown(
    client: dict[str, tuple[float, float]],
    server: dict[str, tuple[float, float]],
    trace: list[list[Any]],
    offset_ms: float,
    wire: dict[tuple[str, str], float] | None = None,
) -> dict[str, Any]:
    """Per hop (ms): summaries over the commands that have every stamp, and per call made
    between ``write_grant`` and ``result`` (CDP method, storage or tabs call).

    ``client`` maps a command id to (request written, reply read) in ms of the wall clock;
    ``offset_ms`` is the worker's clock minus the load generator's; ``wire`` holds a wiretapped
    server's stamps (``wire_stamps``), which add the ``WIRE_PARTS`` and ``ELSEWHERE_PARTS``.
    """
    frames: dict[tuple[str, str, str], float] = {}
    calls: list[tuple[str, str, float, float]] = []
    loads: list[float] = []
    for kind, label, command_id, start, end in trace:
        if kind == "event":
            loads.append(start - offset_ms)
        elif kind in ("send", "recv"):
            if command_id is not None:
                frames.setdefault((kind, label, command_id), start - offset_ms)
        else:
            calls.append((kind, label, start - offset_ms, end - offset_ms))
    wire_keys = [key for parts in WIRE_PARTS.values() for key, _ in parts]
    hops: dict[str, list[float]] = {
        key: []
        for key in [key for key, _ in HOPS + EXECUTE_PARTS + AFTER_LOAD + OVERHEAD]
        + wire_keys
        + [key for key, _ in ELSEWHERE_PARTS]
    }
    hops["total"] = []
    by_call: dict[str, list[float]] = {}
    for command_id, (sent, replied) in client.items():
        stamps = server.get(command_id)
        prepare = frames.get(("recv", "write_prepare", command_id))
        ready = frames.get(("send", "write_ready", command_id))
        grant = frames.get(("recv", "write_grant", command_id))
        result = frames.get(("send", "result", command_id))
        if stamps is None or None in (prepare, ready, grant, result):
            continue
        assert prepare is not None and ready is not None  # noqa: S101 - checked above
        assert grant is not None and result is not None  # noqa: S101
        admitted, completed = stamps
        inside = [c for c in calls if grant <= c[2] <= result]
        cdp = [(c[2], c[3]) for c in calls if c[0] == "cdp" and sent <= c[2] <= replied]
        waits = _load_waits(inside, loads, result)
        # The extension's own time: preparing, and executing while the browser had nothing of ours.
        ours = ready - prepare + result - grant - _covered(_clip(cdp + waits, grant, result))
        spent = {
            kind: sum(c[3] - c[2] for c in inside if c[0] == kind)
            for kind in ("cdp", "storage", "tabs")
        }
        for _, label, start, end in inside:
            by_call.setdefault(label, []).append(end - start)
        execute = result - grant
        values = {
            "http_to_admission": admitted - sent,
            "admission_to_prepare": prepare - admitted,
            "extension_prepare": ready - prepare,
            "ready_to_grant": grant - ready,
            "extension_execute": execute,
            "result_to_outcome": completed - result,
            "outcome_to_reply": replied - completed,
            "execute_cdp": spent["cdp"],
            "execute_storage": spent["storage"],
            "execute_tabs": spent["tabs"],
            "execute_other": execute - spent["cdp"] - spent["storage"] - spent["tabs"],
            "total": replied - sent,
            "browser": _covered(cdp + waits),
            "overhead_strict": replied - sent - _covered(cdp),
            "overhead": replied - sent - _covered(cdp + waits),
            "overhead_extension": ours,
            "overhead_elsewhere": replied - sent - _covered(cdp + waits) - ours,
        }
        if wire is not None:
            frame_stamps = (prepare, ready, grant, result)
            values |= _wire_parts(
                wire, command_id, sent, replied, admitted, completed, frame_stamps
            )
        for key, value in values.items():
            hops[key].append(value)
        load = next((end for _, end in waits), None)
        if load is not None:
            hops["after_load"].append(result - load)
            hops["after_load_browser"].append(_covered(_clip(cdp, load, result)))
    return {
        "commands": len(hops["total"]),
        "hops_ms": {key: summary(values) for key, values in hops.items()},
        "calls_ms": {label: summary(values) for label, values in by_call.items()},
    }


def _clip(
    intervals: list[tuple[float, float]], start: float, end: float
) -> list[tuple[float, float]]:
    """The parts of ``intervals`` inside [start, end]."""
    return [(max(a, start), min(b, end)) for a, b in intervals if b > start and a < end]


def _load_waits(
    inside: list[tuple[str, str, float, float]], loads: list[float], until: float
) -> list[tuple[float, float]]:
    """From each ``Page.navigate``'s answer to the first main-frame load event after it (before
    ``until``): the time a navigation waits on the browser outside any sendCommand, as
    Playwright's ``goto`` waits for ``load``."""
    waits = []
    for kind, label, _, end in inside:
        if kind != "cdp" or label != "Page.navigate":
            continue
        load = next((at for at in sorted(loads) if end <= at <= until), None)
        if load is not None:
            waits.append((end, load))
    return waits


# The steps of an unattended session creation, as the extension's calls and frames show them.
CREATE_STEPS: Final = [
    ("post_to_provision", "POST -> provision at the extension (HTTP, allocation, device frame)"),
    ("open_tab", "extension: chrome.windows.create for the session (0 with the spare window)"),
    ("spare_check", "extension: time under chrome.tabs.get (the spare's check)"),
    ("storage", "extension: time under chrome.storage.session calls"),
    ("attach", "extension: time under chrome.debugger.attach"),
    ("guards", "extension: time under CDP set-up calls (Fetch, Target, Page, Emulation)"),
    ("provision_rest", "extension: time under none of these (JS, awaits)"),
    ("ack_to_ticket", "provision_ack -> session ticket at the extension (server turn)"),
    ("socket_open", "session socket: constructed -> open (ticket checked, upgrade)"),
    ("hello", "open -> hello sent (tab read)"),
    ("hello_to_reply", "hello -> 201 at the client (server's hello turn, commit, reply)"),
]


def create_breakdown(
    spans: list[tuple[float, float]], trace: list[list[Any]], offset_ms: float
) -> dict[str, Any]:
    """Per step of a session creation (ms), from the client's (request, reply) wall-clock spans.

    Each creation is read from the trace entries inside its span (the device socket predates the
    wrappers, so its frames are not stamped): the first ``chrome.storage.session`` call marks the
    provision frame's arrival (the provision reads the session's journal first), the session
    socket's construction the session ticket's arrival, and ``hello`` the end of the extension's
    part (the ``201`` may reach the client before ``hello_ack`` reaches the extension). A
    ``chrome.windows.create`` that starts before ``debugger.attach`` opens the session's own window
    (no spare was ready); one that starts after it opens the next spare, right after the
    ``provision_ack`` is sent, and so marks the end of provisioning. Within provisioning each kind
    of call (storage, ``tabs.get``, ``debugger.attach``, CDP) is reported as the time at least one
    call of that kind was pending; the extension overlaps independent calls, so those rows can add
    up to more than the span, and the rest is the time no call at all was pending (JS, awaits).
    """
    entries = [(k, label, start - offset_ms, end - offset_ms) for k, label, _, start, end in trace]
    steps: dict[str, list[float]] = {key: [] for key, _ in CREATE_STEPS}
    steps["total"] = []
    spare_used = 0
    for sent, replied in spans:
        inside = sorted((e for e in entries if sent <= e[2] <= replied), key=lambda e: e[2])

        def first(kind: str, label: str | None, among: list[tuple[str, str, float, float]]) -> Any:
            return next((e for e in among if e[0] == kind and label in (None, e[1])), None)

        arrival = first("storage", None, inside)
        attach = first("attach", "debugger.attach", inside)
        socket_new = first("socket", "new", inside)
        socket_open = first("socket", "open", inside)
        hello = first("send", "hello", inside)
        if None in (arrival, attach, socket_new, socket_open, hello):
            continue
        windows = [e for e in inside if e[0] == "windows" and e[2] < socket_new[2]]
        own = [e for e in windows if e[2] < attach[2]]
        replenish = next((e for e in windows if e[2] >= attach[2]), None)
        spare_used += not own
        until = socket_new[2] if replenish is None else replenish[2]
        provisioning = [e for e in inside if arrival[2] <= e[2] < until]
        calls = [e for e in provisioning if e[0] in ("storage", "tabs", "attach", "cdp", "windows")]
        spent = {
            kind: _covered([(e[2], e[3]) for e in calls if e[0] == kind])
            for kind in ("storage", "tabs", "attach", "cdp", "windows")
        }
        provision_end = until if replenish is not None else max(e[3] for e in provisioning)
        idle = provision_end - arrival[2] - _covered([(e[2], e[3]) for e in calls])
        values = {
            "post_to_provision": arrival[2] - sent,
            "open_tab": spent["windows"],
            "spare_check": spent["tabs"],
            "storage": spent["storage"],
            "attach": spent["attach"],
            "guards": spent["cdp"],
            "provision_rest": idle,
            "ack_to_ticket": socket_new[2] - provision_end,
            "socket_open": socket_open[2] - socket_new[2],
            "hello": hello[2] - socket_open[2],
            "hello_to_reply": replied - hello[2],
            "total": replied - sent,
        }
        for key, value in values.items():
            steps[key].append(value)
    return {
        "creations": len(steps["total"]),
        "spare_used": spare_used,
        "steps_ms": {k: summary(v) for k, v in steps.items()},
    }


def _covered(intervals: list[tuple[float, float]]) -> float:
    """How long at least one of the (start, end) intervals was open."""
    total, reach = 0.0, -math.inf
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def clock_note(measured: dict[str, Any]) -> str:
    """The table note on how well the worker's clock was matched to the runner's."""
    before, after = measured["clock_offset_ms"]
    return (
        f"worker clock offset {fmt(before)} / {fmt(after)} ms (before / after), error <= "
        f"{fmt(measured['clock_offset_error_ms'])} ms"
    )
