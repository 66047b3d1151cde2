"""The consumer's approval hook: the connector asks, the consumer decides."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from uuid import UUID

    from understudy_connector.generated.models import Command, WriteResult


@dataclass(frozen=True)
class WriteRequest:
    """A write about to be sent, as the approval hook sees it.

    Attributes:
        session_id: The session the write targets.
        command_id: The id the write will carry if approved (correlate it with audit events).
        command: The catalog command, arguments included (a `fill_secret` names its secret, never
            the plaintext).
        preview: The dry-run result (`WriteResult.preview` says what the write resolved to and
            whether the policy allows it) when the session has `preview_writes=True`; else `None`.
        elements: What the caller says each ref argument names, by argument (`{"ref": "Sign in
            button"}`): the `element` descriptions an MCP agent gives, for a prompt to show. They
            are the caller's words, not checked against the page, and never sent.
    """

    session_id: UUID
    command_id: UUID
    command: Command
    preview: WriteResult | None = None
    elements: Mapping[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The catalog name of the command."""
        return self.command.name


ApproveHook = Callable[[WriteRequest], bool | Awaitable[bool]]
"""Returns True to send the write, False to refuse it (`WriteRefused`, nothing sent)."""
