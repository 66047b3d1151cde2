"""How long and how often the connector retries."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RetryConfig:
    """Bounds of the built-in retry rules.

    Attributes:
        command_timeout: Seconds one logical command may take, polls and retries included. When it
            passes while the command is pending, `OutcomeTimeout` is raised (the command may still
            complete); while it is not admitted (busy, unavailable, not started), the last problem
            is raised.
        create_timeout: Seconds a session creation may take, provisioning included.
        close_timeout: Seconds `close(wait=True)` waits for the session to become terminal.
        resubmit_attempts: Resubmissions of the same command after `504 command_not_started` or
            `504 command_timed_out`.
        network_attempts: Repeats of a request after a network error (only where repeating is safe:
            a command with the same id, an unattended creation with the same key, a read, a delete).
        backoff_initial: First backoff delay, in seconds; it doubles up to `backoff_max`.
        backoff_max: Longest backoff delay, in seconds.
        default_retry_after: Seconds to wait when a response that asks for a wait has no
            `Retry-After`.
    """

    command_timeout: float = 60.0
    create_timeout: float = 60.0
    close_timeout: float = 30.0
    resubmit_attempts: int = 4
    network_attempts: int = 3
    backoff_initial: float = 0.5
    backoff_max: float = 8.0
    default_retry_after: float = 1.0

    def backoff(self, failures: int) -> float:
        """The delay before the next attempt after `failures` consecutive failures (1-based)."""
        return float(min(self.backoff_initial * 2 ** (failures - 1), self.backoff_max))
