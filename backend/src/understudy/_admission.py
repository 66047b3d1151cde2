"""Admission rules a command must pass besides the write protocol: what the session's extension
can run, whether writes are blocked, and the command quotas.

Pure checks over rows the session agent has read in its admission turn; each refusal is a
`ProblemError` with its stable code (426 `protocol_upgrade_required`, 409 `writes_blocked`, 429
`rate_limited`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Protocol

from understudy._problems import ProblemError

if TYPE_CHECKING:
    from understudy._config import QuotaPolicy
    from understudy._store._ports import Repositories
    from understudy._store.sessions import SessionRow
    from understudy._telemetry import FieldValue
    from understudy.generated import models as m

SAFE_WRITE: Final = "safe_write_v2"
# An extension without it answers an element_state wait_for as matched (its decoder passed the
# unknown condition through), so the condition is never sent there.
ELEMENT_STATE_WAIT: Final = "wait_for_element_state_v1"
# Writes an older extension does not know: it would prepare them, then fail them after the grant
# with a decoder message that names no remedy, so they are refused here with one.
WRITE_CAPABILITIES: Final[dict[str, str]] = {"drag": "drag_v1", "select_text": "select_text_v1"}


class Report(Protocol):
    """Reports a telemetry record of the turn (`Turns.report_refusal`)."""

    def __call__(self, event: str, **fields: FieldValue) -> None: ...


def check_capabilities(
    repos: Repositories,
    session: SessionRow,
    hello: m.SessionClientHello | None,
    command: dict[str, Any],
    kind: str,
    dry_run: bool,
    command_id: str,
) -> None:
    """Refuse a command the session's extension cannot run, or a write while writes are blocked.

    Raises:
        ProblemError: 426 protocol_upgrade_required, 409 writes_blocked.
    """
    if kind == "write":
        _check_writable(repos, session, hello, dry_run, command_id)
        _check_write_capability(repos, session, hello, str(command.get("name")))
    elif _waits_on_element_state(command):
        capabilities, _ = _device_capabilities(repos, session, hello)
        if capabilities is not None and ELEMENT_STATE_WAIT not in capabilities:
            raise ProblemError(
                426,
                "protocol_upgrade_required",
                "the extension cannot wait on an element's state; update it, or wait "
                "for text or a URL instead",
            )


def _check_write_capability(
    repos: Repositories, session: SessionRow, hello: m.SessionClientHello | None, name: str
) -> None:
    needed = WRITE_CAPABILITIES.get(name)
    if needed is None:
        return
    capabilities, _ = _device_capabilities(repos, session, hello)
    if capabilities is not None and needed not in capabilities:
        raise ProblemError(
            426,
            "protocol_upgrade_required",
            f"the extension cannot run {name}; update it to a version that offers {needed}",
        )


def take_quotas(
    repos: Repositories,
    quota: QuotaPolicy,
    session: SessionRow,
    actor: str,
    name: str,
    now: float,
    refused: Report,
) -> None:
    """Take one command from each quota that applies, or refuse (reporting the refusal).

    Raises:
        ProblemError: 429 rate_limited, with Retry-After.
    """
    if session.command_count >= quota.commands_per_session_lifetime:
        raise ProblemError(
            429,
            "rate_limited",
            f"this session reached its lifetime limit of "
            f"{quota.commands_per_session_lifetime} commands; create a new "
            "session",
            retry_after=max(1.0, session.expires_at - now),
        )
    limits = [
        ("session_commands", session.session_id, quota.commands_per_session_per_min),
        ("tenant_commands", session.tenant, quota.commands_per_tenant_per_min),
    ]
    if name == "fill_secret":
        limits.append(
            (
                "credential_fills",
                f"{session.tenant}/{actor}",
                quota.credential_fills_per_actor_per_min,
            )
        )
    # One statement for every quota; a refusal raises, and the turn's rollback uncounts the
    # quotas that fitted, as if only the ones before the refused one had been tried.
    waits = repos.quotas.take_all(limits, now)
    for (scope, _, limit), wait in zip(limits, waits, strict=True):
        if wait is not None:
            refused("quota.decision", tenant=session.tenant, scope=scope, outcome="refused")
            raise ProblemError(
                429,
                "rate_limited",
                f"the {scope.replace('_', ' ')} quota is {limit} per minute; "
                "retry after the Retry-After delay",
                retry_after=wait,
            )


def _device_capabilities(
    repos: Repositories, session: SessionRow, hello: m.SessionClientHello | None
) -> tuple[set[str] | None, int]:
    """The session's extension's capabilities and protocol version (None: no device yet)."""
    if hello is not None:
        return set(hello.capabilities), hello.protocol_version
    if session.device_id is None:
        return None, 1
    device = repos.devices.get(session.tenant, session.device_id)
    if device is None:
        return set(), 1
    return set(device.capabilities), max(device.protocol_versions, default=1)


def _check_writable(
    repos: Repositories,
    session: SessionRow,
    hello: m.SessionClientHello | None,
    dry_run: bool,
    command_id: str,
) -> None:
    capabilities, version = _device_capabilities(repos, session, hello)
    # No device yet (an attended session still waiting for a person to attach a tab): nothing
    # says the write cannot run there, so it is answered as a read is, by the availability
    # check (503 session_unavailable), not by an upgrade the caller cannot act on.
    if capabilities is not None and (SAFE_WRITE not in capabilities or version < 2):
        raise ProblemError(
            426,
            "protocol_upgrade_required",
            "the extension cannot run safe writes; update it to protocol 2",
        )
    if session.writes_blocked_reason is not None and not dry_run:
        detail = {
            "unknown_outcome": "an earlier write's outcome is unknown; inspect the page with "
            "reads, then delete this session and create a new one to write again",
            "browser_epoch_changed": "the browser restarted; delete this session and create a "
            "new one to write again",
        }.get(session.writes_blocked_reason, "writes are blocked on this session")
        raise ProblemError(
            409, "writes_blocked", detail, command_id=command_id, retry_policy="none"
        )


def _waits_on_element_state(command: dict[str, Any]) -> bool:
    condition = command.get("condition") if command.get("name") == "wait_for" else None
    return isinstance(condition, dict) and condition.get("kind") == "element_state"
