"""The public surface of understudy_connector is curated and pinned."""

from __future__ import annotations

import understudy_connector

PUBLIC = {
    "LOGGER_NAME",
    "Wait",
    "WaitReason",
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
    "WritesBlocked",
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
    "Session",
    "SchemaNotCurrent",
    "SecretNotFound",
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
    "WriteRefused",
    "WriteRequest",
    "__version__",
    "find_nodes",
    "find_ref",
    "render_snapshot",
}


def test_public_names_are_pinned() -> None:
    assert set(understudy_connector.__all__) == PUBLIC
    assert len(understudy_connector.__all__) == len(PUBLIC), "a name is listed twice"
    for name in PUBLIC:
        assert hasattr(understudy_connector, name), name


def test_implementation_modules_are_private() -> None:
    public_modules = {
        name
        for name, value in vars(understudy_connector).items()
        if type(value).__name__ == "module" and not name.startswith("_")
    }
    assert public_modules <= {"generated", "mcp_server", "local_chromium"}
