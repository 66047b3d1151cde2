"""Understudy connector: a Python client and an MCP server for the Understudy API.

```python
from understudy_connector import Client, find_ref

with Client("http://127.0.0.1:8787", api_key) as client:
    with client.session(allowed_origins=["https://example.com"], profile_state_key="crm") as s:
        s.navigate("https://example.com/login")
        page = s.snapshot(interactive_only=True)
        s.click(find_ref(page, role="button", name="Sign in"))
```

The wire models (`SnapshotResult`, `WriteResult`, ...) live in
`understudy_connector.generated.models`.
"""

from understudy_connector._audit import AuditEvent, AuditHook
from understudy_connector._client import AsyncClient, Client
from understudy_connector._config import RetryConfig
from understudy_connector._exceptions import (
    PROBLEM_CLASSES,
    BackendUnreachable,
    CapacityExhausted,
    CloseTimeout,
    CommandFailed,
    CommandIdConflict,
    CommandNotFound,
    CommandNotStarted,
    CommandOutcomeUnknown,
    CommandTimedOut,
    DatabaseUnavailable,
    DeviceExists,
    DeviceNotFound,
    ElementNotFound,
    IdempotencyConflict,
    InvalidRequest,
    NoDeviceAvailable,
    NotReady,
    OperatorApiDisabled,
    OriginConflict,
    OutcomeTimeout,
    ProblemError,
    ProfileConflict,
    ProtocolUpgradeRequired,
    ProvisioningTimeout,
    RateLimited,
    ResponseValidationError,
    SchemaNotCurrent,
    SecretNotFound,
    SessionBusy,
    SessionClosedError,
    SessionNotFound,
    SessionTerminal,
    SessionUnavailable,
    UnattendedDisabled,
    Unauthorized,
    UnderstudyError,
    UsageError,
    WriteRefused,
    WritesBlocked,
)
from understudy_connector._hooks import ApproveHook, WriteRequest
from understudy_connector._lifecycle import SessionState
from understudy_connector._operator import AsyncOperatorClient, OperatorClient
from understudy_connector._progress import LOGGER_NAME, Wait, WaitReason
from understudy_connector._session import AsyncSession, Session
from understudy_connector._snapshot import find_nodes, find_ref, render_snapshot

__version__ = "0.1.0"

__all__ = [
    "LOGGER_NAME",
    "PROBLEM_CLASSES",
    "ApproveHook",
    "AsyncClient",
    "AsyncOperatorClient",
    "AsyncSession",
    "AuditEvent",
    "AuditHook",
    "BackendUnreachable",
    "CapacityExhausted",
    "Client",
    "CloseTimeout",
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
    "OperatorClient",
    "OriginConflict",
    "OutcomeTimeout",
    "ProblemError",
    "ProfileConflict",
    "ProtocolUpgradeRequired",
    "ProvisioningTimeout",
    "RateLimited",
    "ResponseValidationError",
    "RetryConfig",
    "SchemaNotCurrent",
    "SecretNotFound",
    "Session",
    "SessionBusy",
    "SessionClosedError",
    "SessionNotFound",
    "SessionState",
    "SessionTerminal",
    "SessionUnavailable",
    "UnattendedDisabled",
    "Unauthorized",
    "UnderstudyError",
    "UsageError",
    "Wait",
    "WaitReason",
    "WriteRefused",
    "WriteRequest",
    "WritesBlocked",
    "__version__",
    "find_nodes",
    "find_ref",
    "render_snapshot",
]
