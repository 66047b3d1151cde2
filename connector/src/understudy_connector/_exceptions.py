"""Every error the connector raises.

Three families keep misuse, bad data and remote failures apart; branch on the class, never on the
message::

    UnderstudyError
    ├── UsageError                  the caller misused the connector (bad arguments, ...)
    │   └── SessionClosedError      this Session object ended or was closed; create a new session
    ├── ResponseValidationError     a response did not match spec/openapi.yaml
    ├── BackendUnreachable          the network failed on every attempt
    ├── ElementNotFound             no snapshot node matched a find_ref() query
    ├── WriteRefused                the consumer's approval hook refused a write; nothing was sent
    ├── CommandFailed               a durable outcome with status `failed` (carries its code)
    ├── OutcomeTimeout              still pending when the caller's timeout passed; poll it
    ├── ProvisioningTimeout         the session was still provisioning when the timeout passed
    ├── CloseTimeout                close(wait=True): the session was still closing at the timeout
    └── ProblemError                an RFC 9457 problem from the backend: status, code, detail, ...
        ├── InvalidRequest              400 invalid_request
        ├── Unauthorized                401 unauthorized
        ├── UnattendedDisabled          403 unattended_disabled
        ├── OperatorApiDisabled         403 operator_api_disabled
        ├── DeviceNotFound              404 device_not_found
        ├── SecretNotFound              404 secret_not_found
        ├── SessionNotFound             404 session_not_found
        ├── CommandNotFound             404 command_not_found
        ├── DeviceExists                409 device_exists
        ├── IdempotencyConflict         409 idempotency_conflict
        ├── OriginConflict              409 origin_conflict
        ├── ProfileConflict             409 profile_conflict
        ├── CommandOutcomeUnknown       409 command_outcome_unknown (never retried)
        ├── CommandIdConflict           409 command_id_conflict
        ├── WritesBlocked               409 writes_blocked
        ├── SessionTerminal             410 session_terminal
        ├── ProtocolUpgradeRequired     426 protocol_upgrade_required
        ├── CapacityExhausted           429 capacity_exhausted
        ├── RateLimited                 429 rate_limited
        ├── SessionBusy                 429 session_busy
        ├── NoDeviceAvailable           503 no_device_available
        ├── SessionUnavailable          503 session_unavailable
        ├── NotReady                    503 not_ready
        │   ├── DatabaseUnavailable     503 database_unavailable
        │   └── SchemaNotCurrent        503 schema_not_current
        ├── CommandNotStarted           504 command_not_started
        └── CommandTimedOut             504 command_timed_out

`PROBLEM_CLASSES` maps every problem `code` that spec/openapi.yaml documents (read from the
generated `catalog.PROBLEM_CODES`) to its class; a code the connector does not know yet becomes a
plain `ProblemError`, so a newer backend never breaks an older connector.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Final

from understudy_connector.generated.catalog import PROBLEM_CODES

if TYPE_CHECKING:
    from collections.abc import Mapping
    from uuid import UUID

    from understudy_connector.generated.models import (
        CommandOutcome,
        Problem,
        SessionTombstone,
    )

__all__ = [
    "PROBLEM_CLASSES",
    "SPEC_PROBLEM_CODES",
    "BackendUnreachable",
    "CapacityExhausted",
    "CommandFailed",
    "CommandIdConflict",
    "CommandNotFound",
    "CommandNotStarted",
    "CommandOutcomeUnknown",
    "CommandTimedOut",
    "DatabaseUnavailable",
    "DeviceExists",
    "DeviceNotFound",
    "ElementNotFound",
    "IdempotencyConflict",
    "InvalidRequest",
    "NoDeviceAvailable",
    "NotReady",
    "OperatorApiDisabled",
    "OriginConflict",
    "OutcomeTimeout",
    "ProblemError",
    "ProfileConflict",
    "ProtocolUpgradeRequired",
    "ProvisioningTimeout",
    "RateLimited",
    "ResponseValidationError",
    "SchemaNotCurrent",
    "SecretNotFound",
    "SessionBusy",
    "SessionClosedError",
    "SessionNotFound",
    "SessionTerminal",
    "SessionUnavailable",
    "UnattendedDisabled",
    "Unauthorized",
    "UnderstudyError",
    "UsageError",
    "WriteRefused",
    "WritesBlocked",
    "problem_class",
]


class UnderstudyError(Exception):
    """Base class of every error the connector raises."""


class UsageError(UnderstudyError):
    """The caller misused the connector: invalid arguments, a hook of the wrong kind, and so on."""


class SessionClosedError(UsageError):
    """The Session object ended (`410`) or was closed; nothing was sent. Create a new session."""


class ResponseValidationError(UnderstudyError):
    """A response did not match spec/openapi.yaml.

    Attributes:
        operation: The operationId of the request.
        status: The HTTP status received.
    """

    def __init__(self, message: str, *, operation: str, status: int) -> None:
        super().__init__(f"{operation}: HTTP {status}: {message}")
        self.operation = operation
        self.status = status


class BackendUnreachable(UnderstudyError):
    """The backend could not be reached on any attempt.

    For a command, `command_id` is set: the command may have been admitted before the connection
    dropped. Poll it, or resubmit it with the same `command_id`; never with a new one.
    """

    def __init__(self, message: str, *, command_id: UUID | None = None) -> None:
        super().__init__(message)
        self.command_id = command_id


class ElementNotFound(UnderstudyError, LookupError):
    """No node of a snapshot matched a `find_ref()` query."""


class WriteRefused(UnderstudyError):
    """The consumer's approval hook refused a write; the write was not sent.

    Attributes:
        command: The catalog name of the refused command.
        command_id: The id the write would have used.
    """

    def __init__(self, command: str, command_id: UUID) -> None:
        super().__init__(f"{command} was refused by the approval hook; it was not sent")
        self.command = command
        self.command_id = command_id


class CommandFailed(UnderstudyError):
    """The command reached a durable outcome with status `failed`.

    Attributes:
        command_id: The command concerned.
        command: Its catalog name.
        code: The `CommandErrorCode` (`stale_ref`, `origin_not_allowed`, ...).
        message: The backend's explanation.
        outcome: The full `CommandOutcome`.
    """

    def __init__(self, outcome: CommandOutcome) -> None:
        code = outcome.error.code if outcome.error is not None else "unknown_error"
        message = outcome.error.message if outcome.error is not None else "no error given"
        super().__init__(f"{outcome.name} failed ({code}): {message}")
        self.command_id = outcome.command_id
        self.command = outcome.name
        self.code = code
        self.message = message
        self.outcome = outcome


class OutcomeTimeout(UnderstudyError):
    """The caller's timeout passed while the command was still pending or granted.

    The command may still complete. Poll `command_id` (`Client.poll_command`); never resubmit the
    same request under a new id.
    """

    def __init__(self, command: str, command_id: UUID, timeout: float) -> None:
        super().__init__(
            f"{command} {command_id} was still pending after {timeout:g} s; it may still complete, "
            "poll it with the same command id"
        )
        self.command = command
        self.command_id = command_id
        self.timeout = timeout


class ProvisioningTimeout(UnderstudyError):
    """The session was still provisioning when the creation timeout passed.

    The session exists and holds device capacity: delete it (the Session helper does) or keep
    polling `session_id`.
    """

    def __init__(self, session_id: UUID, timeout: float) -> None:
        super().__init__(f"session {session_id} was still provisioning after {timeout:g} s")
        self.session_id = session_id
        self.timeout = timeout


class CloseTimeout(UnderstudyError):
    """`close(wait=True)`: the session was still not terminal when the timeout passed.

    The delete was accepted; the device still holds the session's capacity until the extension
    acknowledges the close or the device-loss deadline passes. Poll `session_id` or wait longer.
    """

    def __init__(self, session_id: UUID, timeout: float, status: str) -> None:
        super().__init__(f"session {session_id} was still {status} after {timeout:g} s")
        self.session_id = session_id
        self.timeout = timeout
        self.status = status


_REGISTERED: dict[str, type[ProblemError]] = {}


class ProblemError(UnderstudyError):
    """An RFC 9457 problem returned by the backend.

    Attributes:
        problem: The parsed `Problem` body.
        status: The HTTP status.
        code: The stable machine code; branch on the class or on this.
        detail: The human-readable explanation, if any.
        command_id: On command problems, the command concerned.
        retry_after: Seconds from `Retry-After`, when the response carried one.
    """

    CODE: ClassVar[str | None] = None
    STATUS: ClassVar[int | None] = None

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.CODE is not None:
            _REGISTERED[cls.CODE] = cls

    def __init__(self, problem: Problem, *, retry_after: float | None = None) -> None:
        text = problem.detail or problem.title
        where = f" (command {problem.command_id})" if problem.command_id is not None else ""
        super().__init__(f"{problem.status} {problem.code}: {text}{where}")
        self.problem = problem
        self.status = problem.status
        self.code = problem.code
        self.detail = problem.detail
        self.command_id = problem.command_id
        self.retry_after = retry_after


class InvalidRequest(ProblemError):
    """The request is malformed or breaks a documented rule; `problem.errors` names the fields."""

    CODE = "invalid_request"
    STATUS = 400


class Unauthorized(ProblemError):
    """The API key is missing, unknown or revoked."""

    CODE = "unauthorized"
    STATUS = 401


class UnattendedDisabled(ProblemError):
    """Unattended sessions are not enabled for this tenant."""

    CODE = "unattended_disabled"
    STATUS = 403


class OperatorApiDisabled(ProblemError):
    """No operator token exists on the backend; create one with `understudy operator-tokens`."""

    CODE = "operator_api_disabled"
    STATUS = 403


class DeviceNotFound(ProblemError):
    """The explicit `device_id` is not enrolled in this tenant; there is no fallback."""

    CODE = "device_not_found"
    STATUS = 404


class SecretNotFound(ProblemError):
    """The tenant's vault holds no secret of this name (operator API)."""

    CODE = "secret_not_found"
    STATUS = 404


class SessionNotFound(ProblemError):
    """No such session in this tenant."""

    CODE = "session_not_found"
    STATUS = 404


class CommandNotFound(ProblemError):
    """No such command in this session."""

    CODE = "command_not_found"
    STATUS = 404


class DeviceExists(ProblemError):
    """The device id is already enrolled (or was revoked) in the tenant; rotate or pick a new id."""

    CODE = "device_exists"
    STATUS = 409


class IdempotencyConflict(ProblemError):
    """The idempotency key was used with a different creation request."""

    CODE = "idempotency_conflict"
    STATUS = 409


class OriginConflict(ProblemError):
    """The origins overlap a live session on the device, or fall outside its local policy."""

    CODE = "origin_conflict"
    STATUS = 409


class ProfileConflict(ProblemError):
    """The profile-state key is already live on the requested device."""

    CODE = "profile_conflict"
    STATUS = 409


class CommandOutcomeUnknown(ProblemError):
    """A side effect may have happened. Never retried: inspect the page with a read instead.

    Further writes on the session are blocked; delete it and create a new one to write again.
    """

    CODE = "command_outcome_unknown"
    STATUS = 409


class CommandIdConflict(ProblemError):
    """The command id was already used for a different request; a new request needs a new id."""

    CODE = "command_id_conflict"
    STATUS = 409


class WritesBlocked(ProblemError):
    """Writes on this session are blocked: an earlier write's outcome is unknown, or the browser
    restarted. Reads still work; delete the session and create a new one to write again."""

    CODE = "writes_blocked"
    STATUS = 409


class SessionTerminal(ProblemError):
    """The session is closing or ended; create a new session.

    Attributes:
        tombstone: How the session ended, when the backend answered with its tombstone.
    """

    CODE = "session_terminal"
    STATUS = 410

    def __init__(
        self,
        problem: Problem,
        *,
        retry_after: float | None = None,
        tombstone: SessionTombstone | None = None,
    ) -> None:
        super().__init__(problem, retry_after=retry_after)
        self.tombstone = tombstone


class ProtocolUpgradeRequired(ProblemError):
    """The extension lacks the safe-write protocol; writes cannot run. Update the extension."""

    CODE = "protocol_upgrade_required"
    STATUS = 426


class CapacityExhausted(ProblemError):
    """Every compatible online device is full; retry after `retry_after` with the same key."""

    CODE = "capacity_exhausted"
    STATUS = 429


class RateLimited(ProblemError):
    """A quota was exceeded; retry after `retry_after`."""

    CODE = "rate_limited"
    STATUS = 429


class SessionBusy(ProblemError):
    """Another command owns the session's admission slot."""

    CODE = "session_busy"
    STATUS = 429


class NoDeviceAvailable(ProblemError):
    """No compatible device is online; retry later with the same idempotency key."""

    CODE = "no_device_available"
    STATUS = 503


class SessionUnavailable(ProblemError):
    """The tab's connection is down; retry after `retry_after`."""

    CODE = "session_unavailable"
    STATUS = 503


class NotReady(ProblemError):
    """The service is starting or draining."""

    CODE = "not_ready"
    STATUS = 503


class DatabaseUnavailable(NotReady):
    """The service cannot reach its database (a `/readyz` answer): route traffic elsewhere."""

    CODE = "database_unavailable"


class SchemaNotCurrent(NotReady):
    """The database is at another schema version than the service's build."""

    CODE = "schema_not_current"


class CommandNotStarted(ProblemError):
    """The backend gave up before the grant; nothing ran. Retrying the same id is safe."""

    CODE = "command_not_started"
    STATUS = 504


class CommandTimedOut(ProblemError):
    """A read timed out; retrying the same id is safe."""

    CODE = "command_timed_out"
    STATUS = 504


SPEC_PROBLEM_CODES: Final[frozenset[str]] = frozenset(
    code for responses in PROBLEM_CODES.values() for codes in responses.values() for code in codes
)
"""Every problem code that spec/openapi.yaml documents."""

PROBLEM_CLASSES: Final[Mapping[str, type[ProblemError]]] = {
    code: _REGISTERED.get(code, ProblemError) for code in sorted(SPEC_PROBLEM_CODES)
}
"""The class raised for each documented problem code."""


def problem_class(code: str) -> type[ProblemError]:
    """The class of a problem code; `ProblemError` itself for a code unknown to this connector."""
    return PROBLEM_CLASSES.get(code, ProblemError)
