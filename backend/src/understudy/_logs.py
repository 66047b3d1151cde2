"""Server logs as JSON lines (`UNDERSTUDY_LOG_FORMAT=json`), for collectors that parse them.

The same content rules as the text logs: every line passes `ServerLogFilter` (tickets, tokens,
query strings, URLs, UUIDs and digests become placeholders; frame payloads are dropped), here on
the handler so the service's own loggers are covered as well as uvicorn's.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any, Final

from understudy._telemetry import SERVER_LOGGERS

HANDLER: Final = "understudy_stderr"


class JsonLinesFormatter(logging.Formatter):
    """One JSON object a record: ts, level, logger, message, and exc when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exc"] = record.exc_text
        return json.dumps(line, ensure_ascii=False, separators=(",", ":"))


def log_config(log_format: str) -> dict[str, Any] | None:
    """uvicorn's `log_config` for the format; None keeps uvicorn's own text configuration."""
    if log_format != "json":
        return None
    # Litestar gives the root logger and its own a text handler when the app is built; both are
    # replaced here, so a library's record is a JSON line too.
    loggers = ("uvicorn", *SERVER_LOGGERS, "understudy", "litestar")
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonLinesFormatter}},
        "filters": {"content_free": {"()": "understudy._telemetry.ServerLogFilter"}},
        "handlers": {
            HANDLER: {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "filters": ["content_free"],
                "stream": "ext://sys.stderr",
            }
        },
        # uvicorn sets the levels of its loggers from `log_level` after applying this.
        "loggers": {
            name: {"handlers": [HANDLER], "propagate": False}
            for name in loggers
            if name != "uvicorn.error"  # propagates to "uvicorn"
        },
        "root": {"handlers": [HANDLER], "level": "WARNING"},
    }
