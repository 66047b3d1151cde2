"""`Session` and `AsyncSession`: one browser session, created on enter and always deleted on exit.

Each catalog command is a method with typed arguments and a typed result (`snapshot()` returns the
generated `SnapshotResult`; its refs are plain strings passed back to `click()`, `fill()`, ...).
Writes take `dry_run=True` for a preview that acts on nothing. The policies behind the methods are
shared with the clients; the two classes only differ in blocking versus awaiting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from understudy_connector import _commands as build
from understudy_connector._audit import AuditScope
from understudy_connector._exceptions import CommandFailed, SessionClosedError
from understudy_connector._governed import Governance, expect, governed_command
from understudy_connector._lifecycle import SessionLifecycle, SessionState
from understudy_connector._session_flow import (
    abandon_open,
    close_session,
    get_session,
    open_session,
)
from understudy_connector.generated.models import (
    GetTabsResult,
    HelloResult,
    ScreenshotResult,
    SessionTombstone,
    SnapshotResult,
    WaitForResult,
    WriteResult,
)

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import TracebackType
    from typing import Self
    from uuid import UUID

    from understudy_connector._audit import AuditHook
    from understudy_connector._client import AsyncClient, Client
    from understudy_connector._commands import (
        Button,
        ElementState,
        ImageFormat,
        Modifier,
        SnapshotFormat,
    )
    from understudy_connector._flow import Flow, FlowContext
    from understudy_connector._hooks import ApproveHook
    from understudy_connector.generated import models

CLEANUP_TIMEOUT = 60.0
"""Seconds an AsyncSession's exit may spend deleting the session, even when cancelled."""


class _SessionBase:
    def __init__(
        self,
        body: models.UnattendedSessionRequest | None,
        idempotency_key: UUID | None,
        *,
        approve: ApproveHook | None,
        preview_writes: bool,
        audit: AuditHook | None,
        ctx: FlowContext,
    ) -> None:
        self._life = SessionLifecycle()
        self._body = body
        self._key = idempotency_key
        self._governance = Governance(approve=approve, preview_writes=preview_writes)
        self._audit = audit
        self._ctx = ctx

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self._life.session_id}, state={self._life.state.value})"

    @property
    def id(self) -> UUID:
        """The session id.

        Raises:
            SessionClosedError: The session was never created.
        """
        if self._life.session_id is None:
            raise SessionClosedError("this session was never created")
        return self._life.session_id

    @property
    def state(self) -> SessionState:
        """Where this object is in its life: new, open, ended (`410`) or closed."""
        return self._life.state

    @property
    def info(self) -> models.Session | None:
        """The session as last read from the backend (at creation or `refresh()`)."""
        return self._life.info

    def _scope(self, operation: str) -> AuditScope:
        session_id = self._life.session_id
        return AuditScope(
            operation=operation,
            session_id=None if session_id is None else str(session_id),
            include_content=self._ctx.audit_content,
        )

    def _open_flow(self) -> Flow[models.Session]:
        return open_session(
            self._ctx, self._scope("createSession"), self._life, self._body, self._key
        )

    def _abandon_flow(self) -> Flow[UUID | None]:
        return abandon_open(
            self._ctx, self._scope("createSession"), self._life, self._body, self._key
        )

    def _close_flow(
        self, wait: bool = False, timeout: float | None = None
    ) -> Flow[models.Session | SessionTombstone | None]:
        return close_session(
            self._ctx, self._scope("deleteSession"), self._life, wait=wait, timeout=timeout
        )

    def _refresh_flow(self) -> Flow[models.Session | SessionTombstone]:
        session_id = self.id
        current = yield from get_session(self._ctx, self._scope("getSession"), session_id)
        if isinstance(current, SessionTombstone):
            self._life.ended()
        else:
            self._life.info = current
        return current

    def _command_flow(
        self, command: models.Command, dry_run: bool, timeout: float | None
    ) -> Flow[models.CommandResult]:
        return governed_command(
            self._ctx, self._life, self._governance, command, dry_run=dry_run, timeout=timeout
        )


def _note_abandon_failure(exc: BaseException, cleanup: Exception) -> None:
    exc.add_note(f"deleting what the interrupted creation left failed as well: {cleanup!r}")


def _note_cleanup_failure(exc: BaseException, session: _SessionBase, cleanup: Exception) -> None:
    exc.add_note(f"deleting session {session._life.session_id} failed as well: {cleanup!r}")


class Session(_SessionBase):
    """A blocking browser session; use `Client.session()` to make one.

    Example:
        ```python
        with client.session(
            allowed_origins=["https://example.com"], profile_state_key="crm"
        ) as s:
            s.navigate("https://example.com/login")
            page = s.snapshot(interactive_only=True)
        ```
    """

    def __init__(
        self,
        client: Client,
        body: models.UnattendedSessionRequest | None,
        idempotency_key: UUID | None,
        *,
        approve: ApproveHook | None,
        preview_writes: bool,
        audit: AuditHook | None,
        ctx: FlowContext,
    ) -> None:
        super().__init__(
            body,
            idempotency_key,
            approve=approve,
            preview_writes=preview_writes,
            audit=audit,
            ctx=ctx,
        )
        self._client = client

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc is None:
            self.close()
            return
        try:
            self.close()
        except Exception as cleanup:
            # The caller's exception wins; the failed cleanup rides along as a note.
            _note_cleanup_failure(exc, self, cleanup)

    def open(self) -> Self:
        """Create the session (waiting while it provisions).

        If the creation does not return (an interrupt, a network failure after the backend
        answered), whatever it left on the backend is deleted before the error propagates.
        """
        try:
            self._client._drive(self._open_flow(), audit=self._audit)
        except BaseException as exc:
            try:
                self._client._drive(self._abandon_flow(), audit=self._audit)
            except Exception as cleanup:
                _note_abandon_failure(exc, cleanup)
            raise
        return self

    def close(
        self, *, wait: bool = False, wait_timeout: float | None = None
    ) -> models.Session | SessionTombstone | None:
        """Delete the session; a second call sends no second delete.

        Args:
            wait: Return only once the session is terminal, its device capacity and origins free,
                so a session created next on that device is not refused (`409 origin_conflict`,
                `429 capacity_exhausted`) while the extension finishes the close. Without it, the
                delete only starts cleanup and returns the `closing` session.
            wait_timeout: Seconds to wait (default `RetryConfig.close_timeout`).

        Raises:
            CloseTimeout: `wait` and the session was still closing at the timeout.
        """
        return self._client._drive(self._close_flow(wait, wait_timeout), audit=self._audit)

    def refresh(self) -> models.Session | SessionTombstone:
        """Read the session again (status, dialogs, whether writes are blocked)."""
        return self._client._drive(self._refresh_flow(), audit=self._audit)

    def execute(
        self,
        command: models.Command,
        *,
        dry_run: bool = False,
        command_timeout: float | None = None,
    ) -> models.CommandResult:
        """Run any catalog command (a generated command model) and return its result.

        Raises:
            SessionClosedError: The session is not open; nothing was sent.
            WriteRefused: The approval hook refused the write.
            CommandFailed: The outcome is `failed`; `code` says why.
            CommandOutcomeUnknown: A write may have happened; never retried.
            OutcomeTimeout: Still pending after the timeout; it may still complete.
            SessionTerminal: The session ended; this object is now `ended`.
        """
        return self._client._drive(
            self._command_flow(command, dry_run, command_timeout),
            audit=self._audit,
            approve=self._governance.approve,
        )

    def hello(self) -> HelloResult:
        """Describe the tab, the protocol and the capabilities in force."""
        return expect(self.execute(build.hello()), HelloResult, "hello")

    def get_tabs(self) -> GetTabsResult:
        """List the tabs this session controls: always exactly its own tab."""
        return expect(self.execute(build.get_tabs()), GetTabsResult, "get_tabs")

    def snapshot(
        self,
        *,
        interactive_only: bool = False,
        max_nodes: int = 1000,
        format: SnapshotFormat | None = None,
        changes_since: str | None = None,
    ) -> SnapshotResult:
        """The page with element refs of the current document generation.

        Args:
            interactive_only: Only what a user can act on.
            max_nodes: Bound on nodes (lines of `text`); `omitted` counts the rest per role.
            format: Unset: both forms, `text` (the compact form for a model's context) and
                `nodes` (the structured tree that `find_ref()` reads), or only the nodes from an
                extension that predates the compact form. `compact`, `nodes` or `both` ask for
                exactly that.
            changes_since: A `snapshot_id` of this document: only what changed since it
                (`changes` says whether it could compare).
        """
        command = build.snapshot(
            interactive_only=interactive_only,
            max_nodes=max_nodes,
            format=format or "both",
            changes_since=changes_since,
        )
        try:
            return expect(self.execute(command), SnapshotResult, "snapshot")
        except CommandFailed as failed:
            older = None if format or changes_since else build.predates_compact(command, failed)
            if older is None:
                raise
        return expect(self.execute(older), SnapshotResult, "snapshot")

    def screenshot(
        self, *, format: ImageFormat = "png", quality: int | None = None, max_width: int = 1280
    ) -> ScreenshotResult:
        """A bounded viewport screenshot (base64 in `data`)."""
        command = build.screenshot(format=format, quality=quality, max_width=max_width)
        return expect(self.execute(command), ScreenshotResult, "screenshot")

    def wait_for(
        self,
        *,
        text: str | None = None,
        text_gone: str | None = None,
        url_contains: str | None = None,
        ref: str | None = None,
        state: ElementState | None = None,
        timeout_ms: int = 5000,
    ) -> WaitForResult:
        """Wait for text, its absence, a URL part, or element `ref` reaching `state` (give one)."""
        command = build.wait_for(
            text=text,
            text_gone=text_gone,
            url_contains=url_contains,
            ref=ref,
            state=state,
            timeout_ms=timeout_ms,
        )
        return expect(self.execute(command), WaitForResult, "wait_for")

    def navigate(self, url: str, *, dry_run: bool = False) -> WriteResult:
        """Load `url`; its origin must be one of the session's allowed origins."""
        return self._write(build.navigate(url), dry_run)

    def go_back(self, *, dry_run: bool = False) -> WriteResult:
        """Go back one history entry."""
        return self._write(build.go_back(), dry_run)

    def go_forward(self, *, dry_run: bool = False) -> WriteResult:
        """Go forward one history entry."""
        return self._write(build.go_forward(), dry_run)

    def reload(self, *, dry_run: bool = False) -> WriteResult:
        """Reload the document."""
        return self._write(build.reload(), dry_run)

    def click(
        self, ref: str, *, button: Button = "left", click_count: int = 1, dry_run: bool = False
    ) -> WriteResult:
        """Click the element `ref` names."""
        return self._write(build.click(ref, button=button, click_count=click_count), dry_run)

    def hover(self, ref: str, *, dry_run: bool = False) -> WriteResult:
        """Move the pointer over the element `ref` names."""
        return self._write(build.hover(ref), dry_run)

    def drag(
        self,
        ref: str,
        *,
        to: str | None = None,
        dx: int | None = None,
        dy: int | None = None,
        steps: int | None = None,
        dry_run: bool = False,
    ) -> WriteResult:
        """Drag the element `ref` names onto the element `to` names, or by `dx`, `dy` CSS pixels.

        Real mouse input with `steps` intermediate moves (default 10), so HTML5 drag and drop and
        pointer-event sliders both see it. A dry run's `preview.drag` says where it would press
        and release.
        """
        return self._write(build.drag(ref, to=to, dx=dx, dy=dy, steps=steps), dry_run)

    def focus(self, ref: str, *, dry_run: bool = False) -> WriteResult:
        """Move keyboard focus to the element `ref` names, pressing and typing nothing."""
        return self._write(build.focus(ref), dry_run)

    def select_text(
        self,
        ref: str | None = None,
        *,
        text: str | None = None,
        start: int | None = None,
        end: int | None = None,
        dry_run: bool = False,
    ) -> WriteResult:
        """Select text: all of `ref`'s, `start`..`end` of it, or the first `text` in it or the page.

        The result's `selection` says what was selected (a dry run's `preview.selection` what
        would be).
        """
        command = build.select_text(ref, text=text, start=start, end=end)
        return self._write(command, dry_run)

    def type(
        self, ref: str, text: str, *, submit: bool = False, dry_run: bool = False
    ) -> WriteResult:
        """Type `text` key by key into the element `ref` names; `submit` presses Enter after."""
        return self._write(build.type_text(ref, text, submit=submit), dry_run)

    def fill(self, ref: str, value: str, *, dry_run: bool = False) -> WriteResult:
        """Replace the value of the editable element `ref` names."""
        return self._write(build.fill(ref, value), dry_run)

    def fill_secret(self, ref: str, secret_ref: str, *, dry_run: bool = False) -> WriteResult:
        """Fill the element `ref` names with the vaulted secret `secret_ref` (`vault:name`)."""
        return self._write(build.fill_secret(ref, secret_ref), dry_run)

    def press_key(
        self, key: str, *, modifiers: Sequence[Modifier] = (), dry_run: bool = False
    ) -> WriteResult:
        """Press one key (a DOM `KeyboardEvent.key` value) with optional modifiers."""
        return self._write(build.press_key(key, modifiers=modifiers), dry_run)

    def select_option(
        self, ref: str, values: Sequence[str], *, dry_run: bool = False
    ) -> WriteResult:
        """Select the options with these values in the `<select>` `ref` names."""
        return self._write(build.select_option(ref, values), dry_run)

    def set_checked(self, ref: str, checked: bool, *, dry_run: bool = False) -> WriteResult:
        """Check or uncheck the checkbox or radio button `ref` names."""
        return self._write(build.set_checked(ref, checked), dry_run)

    def scroll(
        self,
        *,
        ref: str | None = None,
        delta_x: int = 0,
        delta_y: int = 0,
        dry_run: bool = False,
    ) -> WriteResult:
        """Scroll the page by a delta, or bring the element `ref` names into view."""
        return self._write(build.scroll(ref=ref, delta_x=delta_x, delta_y=delta_y), dry_run)

    def switch_tab(self, tab_id: int, *, dry_run: bool = False) -> WriteResult:
        """Bring the session's own tab to the front."""
        return self._write(build.switch_tab(tab_id), dry_run)

    def _write(self, command: models.Command, dry_run: bool) -> WriteResult:
        return expect(self.execute(command, dry_run=dry_run), WriteResult, command.name)


class AsyncSession(_SessionBase):
    """An asyncio browser session; use `AsyncClient.session()` to make one.

    Example:
        ```python
        async with client.session(
            allowed_origins=["https://example.com"], profile_state_key="crm"
        ) as s:
            await s.navigate("https://example.com/login")
            page = await s.snapshot(interactive_only=True)
        ```
    """

    def __init__(
        self,
        client: AsyncClient,
        body: models.UnattendedSessionRequest | None,
        idempotency_key: UUID | None,
        *,
        approve: ApproveHook | None,
        preview_writes: bool,
        audit: AuditHook | None,
        ctx: FlowContext,
    ) -> None:
        super().__init__(
            body,
            idempotency_key,
            approve=approve,
            preview_writes=preview_writes,
            audit=audit,
            ctx=ctx,
        )
        self._client = client

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc is None:
            await self._cleanup()
            return
        try:
            await self._cleanup()
        except Exception as cleanup:
            _note_cleanup_failure(exc, self, cleanup)

    async def _cleanup(self) -> None:
        # Shielded: a cancelled caller (a timeout, a server shutting down) must still release the
        # session, or it holds device capacity until its idle expiry. Bounded, so it cannot hang.
        with anyio.fail_after(CLEANUP_TIMEOUT, shield=True):
            await self.close()

    async def open(self) -> Self:
        """Create the session (waiting while it provisions).

        If the creation does not return (cancelled, a network failure after the backend
        answered), whatever it left on the backend is deleted before the error propagates; the
        cleanup is shielded from the cancellation and bounded like `close` on exit.
        """
        try:
            await self._client._drive(self._open_flow(), audit=self._audit)
        except BaseException as exc:
            try:
                with anyio.fail_after(CLEANUP_TIMEOUT, shield=True):
                    await self._client._drive(self._abandon_flow(), audit=self._audit)
            except Exception as cleanup:
                _note_abandon_failure(exc, cleanup)
            raise
        return self

    async def close(
        self, *, wait: bool = False, wait_timeout: float | None = None
    ) -> models.Session | SessionTombstone | None:
        """Delete the session; with `wait`, until it is terminal; see `Session.close`."""
        return await self._client._drive(self._close_flow(wait, wait_timeout), audit=self._audit)

    async def refresh(self) -> models.Session | SessionTombstone:
        """Read the session again (status, dialogs, whether writes are blocked)."""
        return await self._client._drive(self._refresh_flow(), audit=self._audit)

    async def execute(
        self,
        command: models.Command,
        *,
        dry_run: bool = False,
        command_timeout: float | None = None,
    ) -> models.CommandResult:
        """Run any catalog command and return its result; see `Session.execute`."""
        return await self._client._drive(
            self._command_flow(command, dry_run, command_timeout),
            audit=self._audit,
            approve=self._governance.approve,
        )

    async def hello(self) -> HelloResult:
        """Describe the tab, the protocol and the capabilities in force."""
        return expect(await self.execute(build.hello()), HelloResult, "hello")

    async def get_tabs(self) -> GetTabsResult:
        """List the tabs this session controls: always exactly its own tab."""
        return expect(await self.execute(build.get_tabs()), GetTabsResult, "get_tabs")

    async def snapshot(
        self,
        *,
        interactive_only: bool = False,
        max_nodes: int = 1000,
        format: SnapshotFormat | None = None,
        changes_since: str | None = None,
    ) -> SnapshotResult:
        """The page with element refs of the current document generation; see `Session.snapshot`."""
        command = build.snapshot(
            interactive_only=interactive_only,
            max_nodes=max_nodes,
            format=format or "both",
            changes_since=changes_since,
        )
        try:
            return expect(await self.execute(command), SnapshotResult, "snapshot")
        except CommandFailed as failed:
            older = None if format or changes_since else build.predates_compact(command, failed)
            if older is None:
                raise
        return expect(await self.execute(older), SnapshotResult, "snapshot")

    async def screenshot(
        self, *, format: ImageFormat = "png", quality: int | None = None, max_width: int = 1280
    ) -> ScreenshotResult:
        """A bounded viewport screenshot (base64 in `data`)."""
        command = build.screenshot(format=format, quality=quality, max_width=max_width)
        return expect(await self.execute(command), ScreenshotResult, "screenshot")

    async def wait_for(
        self,
        *,
        text: str | None = None,
        text_gone: str | None = None,
        url_contains: str | None = None,
        ref: str | None = None,
        state: ElementState | None = None,
        timeout_ms: int = 5000,
    ) -> WaitForResult:
        """Wait for text, its absence, a URL part, or element `ref` reaching `state` (give one)."""
        command = build.wait_for(
            text=text,
            text_gone=text_gone,
            url_contains=url_contains,
            ref=ref,
            state=state,
            timeout_ms=timeout_ms,
        )
        return expect(await self.execute(command), WaitForResult, "wait_for")

    async def navigate(self, url: str, *, dry_run: bool = False) -> WriteResult:
        """Load `url`; its origin must be one of the session's allowed origins."""
        return await self._write(build.navigate(url), dry_run)

    async def go_back(self, *, dry_run: bool = False) -> WriteResult:
        """Go back one history entry."""
        return await self._write(build.go_back(), dry_run)

    async def go_forward(self, *, dry_run: bool = False) -> WriteResult:
        """Go forward one history entry."""
        return await self._write(build.go_forward(), dry_run)

    async def reload(self, *, dry_run: bool = False) -> WriteResult:
        """Reload the document."""
        return await self._write(build.reload(), dry_run)

    async def click(
        self, ref: str, *, button: Button = "left", click_count: int = 1, dry_run: bool = False
    ) -> WriteResult:
        """Click the element `ref` names."""
        return await self._write(build.click(ref, button=button, click_count=click_count), dry_run)

    async def hover(self, ref: str, *, dry_run: bool = False) -> WriteResult:
        """Move the pointer over the element `ref` names."""
        return await self._write(build.hover(ref), dry_run)

    async def drag(
        self,
        ref: str,
        *,
        to: str | None = None,
        dx: int | None = None,
        dy: int | None = None,
        steps: int | None = None,
        dry_run: bool = False,
    ) -> WriteResult:
        """Drag the element `ref` names onto the element `to` names, or by `dx`, `dy` CSS pixels.

        Real mouse input with `steps` intermediate moves (default 10), so HTML5 drag and drop and
        pointer-event sliders both see it. A dry run's `preview.drag` says where it would press
        and release.
        """
        return await self._write(build.drag(ref, to=to, dx=dx, dy=dy, steps=steps), dry_run)

    async def focus(self, ref: str, *, dry_run: bool = False) -> WriteResult:
        """Move keyboard focus to the element `ref` names, pressing and typing nothing."""
        return await self._write(build.focus(ref), dry_run)

    async def select_text(
        self,
        ref: str | None = None,
        *,
        text: str | None = None,
        start: int | None = None,
        end: int | None = None,
        dry_run: bool = False,
    ) -> WriteResult:
        """Select text: all of `ref`'s, `start`..`end` of it, or the first `text` in it or the page.

        The result's `selection` says what was selected (a dry run's `preview.selection` what
        would be).
        """
        command = build.select_text(ref, text=text, start=start, end=end)
        return await self._write(command, dry_run)

    async def type(
        self, ref: str, text: str, *, submit: bool = False, dry_run: bool = False
    ) -> WriteResult:
        """Type `text` key by key into the element `ref` names; `submit` presses Enter after."""
        return await self._write(build.type_text(ref, text, submit=submit), dry_run)

    async def fill(self, ref: str, value: str, *, dry_run: bool = False) -> WriteResult:
        """Replace the value of the editable element `ref` names."""
        return await self._write(build.fill(ref, value), dry_run)

    async def fill_secret(self, ref: str, secret_ref: str, *, dry_run: bool = False) -> WriteResult:
        """Fill the element `ref` names with the vaulted secret `secret_ref` (`vault:name`)."""
        return await self._write(build.fill_secret(ref, secret_ref), dry_run)

    async def press_key(
        self, key: str, *, modifiers: Sequence[Modifier] = (), dry_run: bool = False
    ) -> WriteResult:
        """Press one key (a DOM `KeyboardEvent.key` value) with optional modifiers."""
        return await self._write(build.press_key(key, modifiers=modifiers), dry_run)

    async def select_option(
        self, ref: str, values: Sequence[str], *, dry_run: bool = False
    ) -> WriteResult:
        """Select the options with these values in the `<select>` `ref` names."""
        return await self._write(build.select_option(ref, values), dry_run)

    async def set_checked(self, ref: str, checked: bool, *, dry_run: bool = False) -> WriteResult:
        """Check or uncheck the checkbox or radio button `ref` names."""
        return await self._write(build.set_checked(ref, checked), dry_run)

    async def scroll(
        self,
        *,
        ref: str | None = None,
        delta_x: int = 0,
        delta_y: int = 0,
        dry_run: bool = False,
    ) -> WriteResult:
        """Scroll the page by a delta, or bring the element `ref` names into view."""
        return await self._write(build.scroll(ref=ref, delta_x=delta_x, delta_y=delta_y), dry_run)

    async def switch_tab(self, tab_id: int, *, dry_run: bool = False) -> WriteResult:
        """Bring the session's own tab to the front."""
        return await self._write(build.switch_tab(tab_id), dry_run)

    async def _write(self, command: models.Command, dry_run: bool) -> WriteResult:
        return expect(await self.execute(command, dry_run=dry_run), WriteResult, command.name)
