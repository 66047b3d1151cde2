"""A simulated device: an extension stand-in that speaks the generated frames over real sockets.

It takes connect tickets over HTTP with its device credential, holds the device socket, answers
`provision` with a fake tab, opens session sockets from `session_ticket` frames and acknowledges
closes. Knobs make it slow, silent, refusing, disconnecting, or restarting with a new browser
epoch, so tests, fault scenarios and benchmarks drive the backend exactly as the extension would.

    device = SimulatedDevice(base_url, credential)
    await device.connect()            # ticket -> socket -> hello -> welcome
    ...                               # the backend provisions sessions on it
    await device.restart_browser()    # new browser epoch, leases forgotten
    await device.stop()
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx
import websockets
from pydantic import TypeAdapter

from understudy.generated import models as m
from understudy.generated.protocol import DEVICE_TAB_CAPACITY

DEVICE_FRAMES: TypeAdapter[m.DeviceServerFrame] = TypeAdapter(m.DeviceServerFrame)
SESSION_FRAMES: TypeAdapter[m.SessionServerFrame] = TypeAdapter(m.SessionServerFrame)
ALL_CAPABILITIES = [
    "safe_write_v2",
    "dialogs_v1",
    "attended_v1",
    "unattended_v1",
    "snapshot_compact_v1",
    "wait_for_element_state_v1",
    "drag_v1",
    "select_text_v1",
]
_tab_ids = itertools.count(100)
# The kinds of popup the device hello reports containment for, as the spec names them.
POPUP_KINDS = tuple(
    info.alias or name for name, info in m.PopupContainmentByKind.model_fields.items()
)


@dataclass
class Lease:
    session_id: str
    lease_id: str
    lease_epoch: int
    tab_id: int
    allowed_origins: list[str]
    session_socket: Any = None
    session_task: asyncio.Task[None] | None = None
    session_frames: list[m.SessionServerFrame] = field(default_factory=list)
    # The write journal, as the extension keeps it in chrome.storage.session.
    journal: dict[str, str] = field(default_factory=dict)
    journal_results: dict[str, m.SessionClientResult] = field(default_factory=dict)


@dataclass
class Behaviour:
    """How the simulated extension misbehaves. Defaults behave like a healthy extension."""

    provision: Literal["ack", "refuse", "silent"] = "ack"
    provision_delay_s: float = 0.0
    close: Literal["ack", "silent"] = "ack"
    # Seconds between closing a tab and acknowledging it; the real extension takes ~100 ms, which
    # is the window in which the session is still closing and holds its capacity and origins.
    close_delay_s: float = 0.0
    open_session_sockets: bool = True
    protocol_versions: list[int] = field(default_factory=lambda: [1, 2])
    capabilities: list[str] = field(default_factory=lambda: list(ALL_CAPABILITIES))
    local_origin_policy: dict[str, Any] = field(default_factory=lambda: {"mode": "any"})
    ready: Literal["ack", "silent"] = "ack"
    execute: Literal["complete", "crash_after_start", "hold_result"] = "complete"
    read: Literal["answer", "silent"] = "answer"
    fail_with: str | None = None  # a CommandErrorCode every command fails with
    # What the fake page's elements declare a click on them navigates to, by ref: a link's or
    # form's `url`, `method` (GET or POST) and `target` (empty for the same tab). A dry-run click
    # on one previews it as the extension does; the default page declares none.
    navigations: dict[str, dict[str, str]] = field(default_factory=dict)
    # What the page does in response to every executed write, as the extension reports it: a
    # `BlockedNavigation` without `blockedId`/`blockedAt`/`commandId` (e.g. {"kind": "popup",
    # "origin": "https://elsewhere.example", "cause": "popup"}). The simulated extension sends a
    # `navigation_blocked` frame and lists the record in the write's result, as the real one does.
    page_blocks: dict[str, Any] | None = None


class SimulatedDevice:
    def __init__(self, base_url: str, credential: str, behaviour: Behaviour | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.credential = credential
        self.behaviour = behaviour or Behaviour()
        self.browser_epoch = str(uuid.uuid4())
        self.leases: dict[str, Lease] = {}
        self.frames: list[m.DeviceServerFrame] = []
        self.closed_leases: list[str] = []
        self.session_errors: list[str] = []
        self.executions: dict[str, int] = {}  # command id -> real executions of its side effect
        self.secrets_seen: list[str] = []  # every plaintext a grant carried, in order
        self.welcome: m.DeviceServerWelcome | None = None
        self._socket: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._seq = 0
        self._changed = asyncio.Condition()

    # -- device socket -------------------------------------------------------------------------

    async def ticket(self) -> m.ConnectTicket:
        async with httpx.AsyncClient(base_url=self.base_url) as http:
            response = await http.post(
                "/v1/device/connect-ticket",
                json={"browserEpoch": self.browser_epoch},
                headers={"Authorization": f"Bearer {self.credential}"},
            )
        response.raise_for_status()
        return m.ConnectTicket.model_validate_json(response.content)

    async def connect(self, ticket: m.ConnectTicket | None = None) -> m.DeviceServerWelcome:
        """Take a ticket (unless given), open the device socket, say hello, await welcome."""
        ticket = ticket or await self.ticket()
        self.welcome = None
        self._socket = await websockets.connect(ticket.socket_url, open_timeout=5)
        await self._send(self._hello())
        self._reader = asyncio.create_task(self._read())
        welcome: m.DeviceServerWelcome = await self.wait_for(lambda: self.welcome, within=5)
        return welcome

    def _hello(self) -> m.DeviceClientHello:
        free = DEVICE_TAB_CAPACITY - len(self.leases)
        return m.DeviceClientHello.model_validate(
            {
                "type": "hello",
                "protocolVersions": self.behaviour.protocol_versions,
                "capabilities": self.behaviour.capabilities,
                "browserEpoch": self.browser_epoch,
                "extensionVersion": "0.0.0-sim",
                "localOriginPolicy": self.behaviour.local_origin_policy,
                "capacity": {"total": DEVICE_TAB_CAPACITY, "free": max(0, free)},
                "leases": [
                    {
                        "leaseId": lease.lease_id,
                        "sessionId": lease.session_id,
                        "leaseEpoch": lease.lease_epoch,
                        "tabId": lease.tab_id,
                    }
                    for lease in self.leases.values()
                ],
                "popupContainment": dict.fromkeys(POPUP_KINDS, "blocked_before_request"),
            }
        )

    async def heartbeat(self) -> None:
        self._seq += 1
        await self._send(
            m.DeviceClientHeartbeat(
                type="heartbeat",
                seq=self._seq,
                free_capacity=max(0, DEVICE_TAB_CAPACITY - len(self.leases)),
            )
        )

    async def request_ticket(self, lease: Lease) -> None:
        """Ask for a fresh session ticket over the device socket, as the extension does after
        its session socket closed."""
        await self.send_frame(
            m.DeviceClientTicketRequest.model_validate(
                {
                    "type": "ticket_request",
                    "sessionId": lease.session_id,
                    "leaseId": lease.lease_id,
                    "leaseEpoch": lease.lease_epoch,
                }
            )
        )

    async def send_frame(self, frame: m.DeviceClientFrame | dict[str, Any]) -> None:
        """Send any frame (or raw JSON object), for tests of the backend's refusals."""
        if isinstance(frame, dict):
            await self._socket.send(json.dumps(frame))
        else:
            await self._send(frame)

    async def _send(self, frame: Any) -> None:
        await self._socket.send(frame.to_wire_json())

    async def _read(self) -> None:
        socket = self._socket
        with contextlib.suppress(websockets.ConnectionClosed):
            async for raw in socket:
                frame = DEVICE_FRAMES.validate_json(raw)
                self.frames.append(frame)
                await self._on_frame(frame)
                async with self._changed:
                    self._changed.notify_all()
        async with self._changed:
            self._changed.notify_all()

    async def _ack_later(self, ack: m.DeviceClientCloseAck) -> None:
        await asyncio.sleep(self.behaviour.close_delay_s)
        # The device may have disconnected meanwhile; the backend's loss deadline then settles it.
        with contextlib.suppress(websockets.ConnectionClosed):
            await self._send(ack)

    async def _on_frame(self, frame: m.DeviceServerFrame) -> None:
        match frame:
            case m.DeviceServerWelcome():
                self.welcome = frame
            case m.DeviceServerProvision():
                asyncio.create_task(self._provision(frame))  # noqa: RUF006 - held by the loop
            case m.DeviceServerClose():
                lease = self.leases.pop(str(frame.lease_id), None)
                if lease is not None:
                    await self._close_session_socket(lease)
                self.closed_leases.append(str(frame.lease_id))
                if self.behaviour.close == "ack":
                    ack = m.DeviceClientCloseAck(
                        type="close_ack", lease_id=frame.lease_id, lease_epoch=frame.lease_epoch
                    )
                    if self.behaviour.close_delay_s > 0:
                        asyncio.create_task(self._ack_later(ack))  # noqa: RUF006 - held by the loop
                    else:
                        await self._send(ack)
            case m.DeviceServerSessionTicket():
                lease = self.leases.get(str(frame.lease_id))
                if lease is not None and self.behaviour.open_session_sockets:
                    try:
                        await self._open_session(lease, frame)
                    except (OSError, websockets.InvalidHandshake) as exc:
                        # As the extension does: note it and ask for a fresh ticket once.
                        self.session_errors.append(repr(exc))
                        if len(self.session_errors) < 3:
                            await self._send(
                                m.DeviceClientTicketRequest(
                                    type="ticket_request",
                                    session_id=frame.session_id,
                                    lease_id=frame.lease_id,
                                    lease_epoch=frame.lease_epoch,
                                )
                            )
                    except websockets.ConnectionClosed as exc:
                        # The backend closed the new session socket at once (the session left
                        # `connected` meanwhile, e.g. deleted right after creation). Caught here:
                        # escaping, it would end this device socket's reader, which suppresses
                        # the same exception class for its own socket, and the close frame that
                        # follows would never be read.
                        self.session_errors.append(repr(exc))
            case (
                m.DeviceServerAttachResult() | m.DeviceServerHeartbeatAck() | m.DeviceServerError()
            ):
                pass

    async def _provision(self, frame: m.DeviceServerProvision) -> None:
        if self.behaviour.provision_delay_s:
            await asyncio.sleep(self.behaviour.provision_delay_s)
        if self.behaviour.provision == "silent":
            return
        if self.behaviour.provision == "refuse":
            await self._send(
                m.DeviceClientProvisionAck(
                    type="provision_ack",
                    lease_id=frame.lease_id,
                    session_id=frame.session_id,
                    lease_epoch=frame.lease_epoch,
                    browser_epoch=uuid.UUID(self.browser_epoch),
                    outcome="refused",
                    error=m.ErrorInfo(code="no_window", message="refused"),
                )
            )
            return
        lease = self.leases.get(str(frame.lease_id))
        if lease is None or lease.lease_epoch != frame.lease_epoch:
            lease = Lease(
                str(frame.session_id),
                str(frame.lease_id),
                frame.lease_epoch,
                next(_tab_ids),
                list(frame.allowed_origins),
            )
            self.leases[lease.lease_id] = lease
        await self._send(
            m.DeviceClientProvisionAck(
                type="provision_ack",
                lease_id=frame.lease_id,
                session_id=frame.session_id,
                lease_epoch=frame.lease_epoch,
                browser_epoch=uuid.UUID(self.browser_epoch),
                outcome="provisioned",
                tab_id=lease.tab_id,
            )
        )

    async def attach(self, session_id: str, tab_id: int = 7) -> m.DeviceServerAttachResult:
        """A person attaches an existing tab to an attended session from the panel."""
        request_id = uuid.uuid4()
        await self._send(
            m.DeviceClientAttachRequest(
                type="attach_request",
                request_id=request_id,
                session_id=uuid.UUID(session_id),
                tab_id=tab_id,
                browser_epoch=uuid.UUID(self.browser_epoch),
            )
        )
        result: m.DeviceServerAttachResult = await self.wait_for(
            lambda: next(
                (
                    f
                    for f in self.frames
                    if isinstance(f, m.DeviceServerAttachResult) and f.request_id == request_id
                ),
                None,
            ),
            within=5,
        )
        if result.outcome == "attached":
            lease = Lease(session_id, str(result.lease_id), result.lease_epoch or 1, tab_id, [])
            self.leases[lease.lease_id] = lease
            ticket = next(
                (
                    f
                    for f in self.frames
                    if isinstance(f, m.DeviceServerSessionTicket)
                    and str(f.lease_id) == lease.lease_id
                ),
                None,
            )
            if ticket is not None and self.behaviour.open_session_sockets:
                await self._open_session(lease, ticket)
        return result

    # -- session sockets -----------------------------------------------------------------------

    async def _open_session(self, lease: Lease, ticket: m.DeviceServerSessionTicket) -> None:
        await self._close_session_socket(lease)
        socket = await websockets.connect(
            f"{ticket.socket_url}?ticket={ticket.ticket}", open_timeout=5
        )
        lease.session_socket = socket
        await socket.send(
            m.SessionClientHello.model_validate(
                {
                    "type": "hello",
                    "sessionId": lease.session_id,
                    "leaseId": lease.lease_id,
                    "leaseEpoch": lease.lease_epoch,
                    "browserEpoch": self.browser_epoch,
                    "protocolVersion": max(self.behaviour.protocol_versions),
                    "capabilities": self.behaviour.capabilities,
                    "tab": {
                        "tabId": lease.tab_id,
                        "url": "about:blank",
                        "title": "",
                        "active": False,
                    },
                    "journal": [
                        {"commandId": cid, "state": state} for cid, state in lease.journal.items()
                    ],
                }
            ).to_wire_json()
        )
        lease.session_task = asyncio.create_task(self._read_session(lease, socket))

    async def _read_session(self, lease: Lease, socket: Any) -> None:
        with contextlib.suppress(websockets.ConnectionClosed):
            async for raw in socket:
                frame = SESSION_FRAMES.validate_json(raw)
                lease.session_frames.append(frame)
                await self._on_session_frame(lease, socket, frame)
                async with self._changed:
                    self._changed.notify_all()

    async def _on_session_frame(
        self, lease: Lease, socket: Any, frame: m.SessionServerFrame
    ) -> None:
        async def send(reply: Any) -> None:
            await socket.send(reply.to_wire_json())

        b = self.behaviour
        match frame:
            case m.SessionServerHelloAck():
                for cid in [*map(str, frame.cancel), *map(str, frame.unknown)]:
                    lease.journal.pop(cid, None)
                for cid, state in list(lease.journal.items()):
                    if state == "completed_unacked" and cid in lease.journal_results:
                        replay = lease.journal_results[cid].model_copy(update={"replayed": True})
                        await send(replay)
            case m.SessionServerRead():
                if b.read == "silent":
                    return
                cid = str(frame.command_id)
                await send(
                    m.SessionClientReadResult.model_validate(
                        self._outcome(cid, frame.command.to_wire(), lease, read=True)
                    )
                )
            case m.SessionServerWritePrepare():
                lease.journal[str(frame.command_id)] = "prepared"
                if b.ready == "ack":
                    await send(
                        m.SessionClientWriteReady(
                            type="write_ready",
                            command_id=frame.command_id,
                            lease_epoch=frame.lease_epoch,
                        )
                    )
            case m.SessionServerWriteGrant():
                cid = str(frame.command_id)
                if lease.journal.get(cid) != "prepared":
                    return  # never run a grant we did not prepare, nor one twice
                lease.journal[cid] = "started"
                # Every plaintext that reached the device, dry run or not (a dry run carries none).
                if frame.secret_value is not None:
                    self.secrets_seen.append(frame.secret_value)
                if not frame.dry_run:
                    self.executions[cid] = self.executions.get(cid, 0) + 1
                if b.execute == "crash_after_start":
                    return
                command = frame.command.to_wire()
                needs_secret = command["name"] == "fill_secret" and not frame.dry_run
                if needs_secret and not frame.secret_value:
                    # As the extension does: a real fill_secret needs the plaintext in its grant.
                    outcome: dict[str, Any] = {
                        "type": "result",
                        "commandId": cid,
                        "outcome": "failed",
                        "error": {"code": "secret_not_found", "message": "no secret in the grant"},
                    }
                else:
                    outcome = self._outcome(cid, command, lease, read=False, dry_run=frame.dry_run)
                if b.page_blocks is not None and not frame.dry_run and "result" in outcome:
                    record = {
                        **b.page_blocks,
                        "blockedId": str(uuid.uuid4()),
                        "blockedAt": "2026-11-30T09:00:02Z",
                        "commandId": cid,
                    }
                    await socket.send(json.dumps({"type": "navigation_blocked", "blocked": record}))
                    outcome["result"]["blockedNavigations"] = [record]
                result = m.SessionClientResult.model_validate(outcome)
                lease.journal[cid] = "completed_unacked"
                lease.journal_results[cid] = result
                if b.execute == "complete":
                    await send(result)
            case m.SessionServerResultAck():
                lease.journal.pop(str(frame.command_id), None)
                lease.journal_results.pop(str(frame.command_id), None)
            case m.SessionServerCancel():
                if lease.journal.get(str(frame.command_id)) == "prepared":
                    lease.journal.pop(str(frame.command_id), None)
            case m.SessionServerDialogAck() | m.SessionServerError():
                pass

    def _outcome(
        self,
        cid: str,
        command: dict[str, Any],
        lease: Lease,
        *,
        read: bool,
        dry_run: bool | None = False,
    ) -> dict[str, Any]:
        frame_type = "read_result" if read else "result"
        if self.behaviour.fail_with is not None:
            return {
                "type": frame_type,
                "commandId": cid,
                "outcome": "failed",
                "error": {"code": self.behaviour.fail_with, "message": "simulated failure"},
            }
        return {
            "type": frame_type,
            "commandId": cid,
            "outcome": "succeeded",
            "result": fake_result(
                command, lease, dry_run=bool(dry_run), navigations=self.behaviour.navigations
            ),
        }

    async def send_dialog(self, session_id: str, record: dict[str, Any]) -> None:
        lease = next(lease for lease in self.leases.values() if lease.session_id == session_id)
        await lease.session_socket.send(json.dumps({"type": "dialog", "dialog": record}))

    async def send_session_frame(self, session_id: str, frame: dict[str, Any]) -> None:
        lease = next(lease for lease in self.leases.values() if lease.session_id == session_id)
        await lease.session_socket.send(json.dumps(frame))

    async def restart_extension(self) -> m.DeviceServerWelcome:
        """A same-epoch extension restart (service-worker eviction): sockets drop; the leases and
        the write journal survive in storage.session; everything reconnects."""
        await self.disconnect()
        return await self.connect()

    async def _close_session_socket(self, lease: Lease) -> None:
        if lease.session_socket is not None:
            with contextlib.suppress(Exception):
                await lease.session_socket.close()
            lease.session_socket = None

    # -- faults ----------------------------------------------------------------------------------

    async def disconnect(self) -> None:
        """Drop every socket, as a service-worker eviction would; leases are kept."""
        for lease in self.leases.values():
            await self._close_session_socket(lease)
        if self._socket is not None:
            await self._socket.close()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader

    async def restart_browser(self) -> m.DeviceServerWelcome:
        """A browser restart: a new browser epoch, every lease and tab forgotten, reconnect."""
        await self.disconnect()
        self.leases.clear()
        self.browser_epoch = str(uuid.uuid4())
        return await self.connect()

    async def stop(self) -> None:
        await self.disconnect()

    # -- waiting ---------------------------------------------------------------------------------

    async def wait_for(self, predicate: Any, within: float = 5.0) -> Any:
        """Wait until `predicate()` returns something truthy (re-checked on every frame)."""

        async def loop() -> Any:
            async with self._changed:
                while True:
                    value = predicate()
                    if value:
                        return value
                    await self._changed.wait()

        return await asyncio.wait_for(loop(), within)

    def frames_of(self, kind: type[Any]) -> list[Any]:
        return [f for f in self.frames if isinstance(f, kind)]


# The fake page: a login form. Its refs stay stable across snapshots (generation 1).
FAKE_NODES: list[dict[str, Any]] = [
    {"role": "RootWebArea", "name": "Example", "depth": 0},
    {"ref": "g1e1", "role": "button", "name": "Sign in", "depth": 1},
    {"ref": "g1e2", "role": "textbox", "name": "Username", "depth": 1, "multiline": False},
    {"ref": "g1e3", "role": "textbox", "name": "Password", "depth": 1, "multiline": False},
]

# The same page as the extension's compact text writes it. The page never changes, so every
# snapshot is `g1s1` and changes since it are none.
FAKE_SNAPSHOT_ID = "g1s1"
FAKE_HEADER = f"# Example — https://example.com/ ({FAKE_SNAPSHOT_ID}"
FAKE_LINES = (
    'button "Sign in" [g1e1]',
    'textbox "Username" [g1e2]',
    'textbox "Password" password [g1e3]',
)


def fake_snapshot(command: dict[str, Any], tab: dict[str, Any]) -> dict[str, Any]:
    """The fake page in the format asked for; `changesSince` compares with the one snapshot."""
    fmt = command.get("format", "nodes")
    result: dict[str, Any] = {
        "name": "snapshot",
        "url": tab["url"],
        "title": "Example",
        "generation": 1,
        "snapshotId": FAKE_SNAPSHOT_ID,
        "truncated": False,
        "nodes": [dict(node) for node in FAKE_NODES] if fmt in ("nodes", "both") else [],
    }
    since = command.get("changesSince")
    compared = since == FAKE_SNAPSHOT_ID
    if since is not None:
        result["changes"] = (
            {"since": since, "status": "compared", "added": 0, "changed": 0, "removed": 0}
            if compared
            else {"since": since, "status": "unavailable"}
        )
        if compared:
            result["nodes"] = []
    if fmt in ("compact", "both"):
        if compared:
            body = [f"{FAKE_HEADER}: changes since {since}, +0 ~0 -0; its refs still hold)"]
            body.append("(nothing changed)")
        else:
            body = [f"{FAKE_HEADER})", *FAKE_LINES]
        result["text"] = "\n".join(body)
    return result


# Targets that keep a navigation in the tab's own document (others open a popup).
SAME_TAB_TARGETS = frozenset({"", "_self", "_parent", "_top"})


def _allows(lease: Lease, url: str) -> bool:
    parts = urlsplit(url)
    return not lease.allowed_origins or f"{parts.scheme}://{parts.netloc}" in lease.allowed_origins


def fake_preview(
    command: dict[str, Any], lease: Lease, navigations: dict[str, dict[str, str]] | None = None
) -> dict[str, Any]:
    """What a dry run of `command` resolves to, as the extension's `WritePreview` says it."""
    if "url" in command:
        return {"navigatesTo": command["url"], "allowed": _allows(lease, command["url"])}
    node = next((n for n in FAKE_NODES if n.get("ref") == command.get("ref")), None)
    if node is None:
        return {"allowed": True}
    preview: dict[str, Any] = {"targetRole": node["role"], "targetName": node["name"]}
    navigation = (navigations or {}).get(node["ref"]) if command["name"] == "click" else None
    if navigation is None:
        return {**preview, "allowed": True}
    return {
        **preview,
        "navigatesTo": navigation["url"],
        "method": navigation["method"],
        "allowed": _allows(lease, navigation["url"]),
        "opensPopup": navigation.get("target", "").lower() not in SAME_TAB_TARGETS,
    }


def fake_result(
    command: dict[str, Any],
    lease: Lease,
    *,
    dry_run: bool = False,
    navigations: dict[str, dict[str, str]] | None = None,
) -> dict[str, Any]:
    """An instant, plausible result for each catalog command (a dry run carries a preview)."""
    name = command["name"]
    tab = {"tabId": lease.tab_id, "url": "https://example.com/", "title": "Example", "active": True}
    if name == "hello":
        return {"name": name, "protocolVersion": 2, "capabilities": ["safe_write_v2"], "tab": tab}
    if name == "get_tabs":
        return {"name": name, "tabs": [tab]}
    if name == "snapshot":
        return fake_snapshot(command, tab)
    if name == "screenshot":
        return {
            "name": name,
            "mimeType": "image/png",
            "data": "iVBORw0KGgo=",
            "width": 1,
            "height": 1,
        }
    if name == "wait_for":
        return {"name": name, "matched": True, "elapsedMs": 1}
    result = {"name": name, "url": tab["url"], "title": "Example", "generation": 1}
    if dry_run:
        result["preview"] = fake_preview(command, lease, navigations)
    if name == "select_text":
        selection = fake_selection(command)
        if dry_run:
            result["preview"]["selection"] = selection
        else:
            result["selection"] = selection
    elif name == "drag" and dry_run:
        result["preview"]["drag"] = fake_drag(command)
    return result


def fake_selection(command: dict[str, Any]) -> dict[str, Any]:
    """What `select_text` selects on the fake page: the text asked for, or the element's name."""
    node = next((n for n in FAKE_NODES if n.get("ref") == command.get("ref")), FAKE_NODES[0])
    whole = str(node["name"])
    if "text" in command:
        text = str(command["text"])
        start = max(0, whole.find(text))
    else:
        start = int(command.get("start", 0))
        text = whole[start : int(command.get("end", len(whole)))]
    return {"text": text, "length": len(text), "start": start, "end": start + len(text)}


def fake_drag(command: dict[str, Any]) -> dict[str, Any]:
    """Where a `drag` would press and release on the fake page (every element at (60, 40))."""
    preview: dict[str, Any] = {"fromX": 60, "fromY": 40, "steps": command.get("steps", 10)}
    target = next((n for n in FAKE_NODES if n.get("ref") == command.get("targetRef")), None)
    if target is None:
        preview.update(toX=60 + command.get("dx", 0), toY=40 + command.get("dy", 0))
    else:
        preview.update(toX=60, toY=40, dropRole=target["role"], dropName=target["name"])
    return preview
