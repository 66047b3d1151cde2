"""The filter on uvicorn's loggers keeps request lines and frames out of the logs."""

from __future__ import annotations

import logging
import uuid

from uvicorn.logging import AccessFormatter

from understudy import _security
from understudy._telemetry import ServerLogFilter


def record(msg: str, *args: object, name: str = "uvicorn.error") -> logging.LogRecord:
    return logging.LogRecord(name, logging.INFO, __file__, 1, msg, args, None)


def test_an_access_line_keeps_its_shape_but_loses_ids_and_query() -> None:
    session_id = str(uuid.uuid4())
    line = record(
        '%s - "%s %s HTTP/%s" %d',
        "127.0.0.1:5000",
        "GET",
        f"/v1/sessions/{session_id}/socket?ticket=ust1.abc.def",
        "1.1",
        101,
        name="uvicorn.access",
    )

    assert ServerLogFilter().filter(line)

    text = AccessFormatter("%(message)s", use_colors=False).format(line)
    assert text == '127.0.0.1:5000 - "GET /v1/sessions/<id>/socket?<query> HTTP/1.1" 101'


def test_tokens_urls_and_digests_are_replaced() -> None:
    token = _security.generate_token("consumer")
    digest = _security.token_digest(token)
    line = record("key %s digest %s origin %s", token, digest, "https://shop.example")

    assert ServerLogFilter().filter(line)

    assert line.getMessage() == "key <token> digest <digest> origin <url>"


def test_frame_payload_lines_are_dropped_and_control_frames_kept() -> None:
    frame = record("< %s", 'TEXT \'{"type":"welcome","deviceId":"laptop-1"}\' [40 bytes]')
    close = record("> %s", "CLOSE 4000 (private use) superseded [12 bytes]")

    assert not ServerLogFilter().filter(frame)
    assert ServerLogFilter().filter(close)
    assert close.getMessage() == "> CLOSE 4000 (private use) superseded [12 bytes]"


def test_an_unformattable_record_is_dropped() -> None:
    assert not ServerLogFilter().filter(record("%s %s", "only one"))
