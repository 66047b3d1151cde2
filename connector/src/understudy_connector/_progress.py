"""What the connector tells its caller while it retries and waits.

Every wait a policy makes (`Sleep`) carries a `Wait`: which operation, why, which attempt comes
next and how much of the call's time bound is used. The drivers log it on the
`understudy_connector` logger and hand it to the `progress` callback, so a long unattended
create or a pending write is visible while it lasts instead of looking hung.

Log levels: `INFO` for each wait (a retry after a network error, a resubmission, a poll of a
pending command or of a provisioning session, a wait for capacity), `DEBUG` for each request and
its status. Nothing logged carries the API key or a request body; URLs carry the ids the caller
already holds.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

LOGGER_NAME: Final = "understudy_connector"
log = logging.getLogger(LOGGER_NAME)

WaitReason: TypeAlias = Literal[
    "network_error",  # the request failed on the network; the same request is repeated
    "pending",  # a command was admitted and has no outcome yet; its Location is polled
    "not_started",  # 504 command_not_started / command_timed_out; the same command is resubmitted
    "busy",  # 429 session_busy / rate_limited or 503 session_unavailable; resubmitted after it
    "provisioning",  # an unattended session is still being provisioned; it is polled
    "rate_limited",  # 429 while polling a session; polled again after Retry-After
    "no_device",  # 503 no_device_available; the create is repeated with the same key
    "closing",  # close(wait=True): the session is closing; polled until terminal
]

_TEXT: Final[dict[str, str]] = {
    "network_error": "network error, repeating the request",
    "pending": "the command is pending, polling it",
    "not_started": "the command did not start, resubmitting it",
    "busy": "the session is busy or unavailable, resubmitting",
    "provisioning": "the session is provisioning, polling it",
    "rate_limited": "rate limited, polling again",
    "no_device": "no device is available, retrying the create",
    "closing": "the session is closing, polling it",
}


@dataclass(frozen=True)
class Wait:
    """One wait of a call that is still going on, as `progress` callbacks receive it.

    Attributes:
        operation: The API operation that is waited on (`createSession`, `pollCommand`, ...).
        reason: Why it waits (see `WaitReason`).
        seconds: How long this wait lasts.
        attempt: The number of the request that follows the wait (the first request is 1).
        elapsed: Seconds since the call started.
        timeout: The call's time bound in seconds, or None when it has none.
        subject: The session or command id concerned, when there is one.
    """

    operation: str
    reason: WaitReason
    seconds: float
    attempt: int
    elapsed: float
    timeout: float | None = None
    subject: str | None = None

    def describe(self) -> str:
        """One log line: what is waited for, for how long and how much of the bound is used."""
        bound = f" of {self.timeout:g} s" if self.timeout is not None else ""
        about = f" {self.subject}" if self.subject else ""
        return (
            f"{self.operation}{about}: {_TEXT[self.reason]} in {self.seconds:g} s "
            f"(attempt {self.attempt}; {self.elapsed:.1f} s{bound} used)"
        )


def report_wait(wait: Wait) -> None:
    log.info("%s", wait.describe())


def report_reply(method: str, url: str, status: int | str, latency_ms: float) -> None:
    log.debug("%s %s -> %s in %.0f ms", method, url, status, latency_ms)
