"""Writing a session's and a run's report files into the artifact store.

A session's files sit beside the screenshots the loop already stored:
`<session_prefix>/transcript.json.gz`, `report.json`, `report.md`, `report.html`. The run's
aggregate writes `<run_prefix>/report.json`, `report.md`, `report.html`; its HTML reads the
sessions' `report.json` and screenshots back from the store. Every file is deterministic for the
same input: JSON with sorted keys, gzip without a timestamp or a file name.
"""

from __future__ import annotations

import gzip
import json
from typing import TYPE_CHECKING, Any

from synthetic_users._artifacts import ArtifactNotFound, run_prefix, session_prefix
from synthetic_users._reports._render import (
    render_aggregate_html,
    render_aggregate_markdown,
    render_session_html,
    render_session_markdown,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from synthetic_users._artifacts import ArtifactStore

TRANSCRIPT = "transcript.json.gz"
REPORT_JSON, REPORT_MD, REPORT_HTML = "report.json", "report.md", "report.html"


def dump_json(value: Mapping[str, Any]) -> bytes:
    """`value` as the reports store JSON: UTF-8, sorted keys, indented, a final newline."""
    return (json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode()


def gzip_json(value: Mapping[str, Any]) -> bytes:
    """`value` as compact JSON, gzipped with no timestamp, so equal input gives equal bytes."""
    raw = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return gzip.compress(raw, compresslevel=9, mtime=0)


def read_transcript(data: bytes) -> dict[str, Any]:
    """A `transcript.json.gz` back as a dict."""
    value: dict[str, Any] = json.loads(gzip.decompress(data))
    return value


def _loader(store: ArtifactStore, prefix: str) -> Callable[[str], bytes | None]:
    def load(name: str) -> bytes | None:
        try:
            return store.get(f"{prefix}/screenshots/{name}")
        except (ArtifactNotFound, ValueError):
            return None  # a missing or oddly named screenshot is named in the report instead

    return load


def write_session_artifacts(
    store: ArtifactStore,
    customer: str,
    run_id: str,
    session_id: str,
    transcript: Mapping[str, Any],
    report: Mapping[str, Any],
) -> list[str]:
    """Write a persona session's transcript and reports; returns the keys written.

    The screenshots the report names are read from `<session>/screenshots/` and embedded in
    `report.html`.
    """
    prefix = session_prefix(customer, run_id, session_id)
    files = {
        TRANSCRIPT: gzip_json(transcript),
        REPORT_JSON: dump_json(report),
        REPORT_MD: render_session_markdown(report).encode(),
        REPORT_HTML: render_session_html(
            report, _loader(store, prefix), transcript=transcript
        ).encode(),
    }
    keys = []
    for name, data in files.items():
        store.put(f"{prefix}/{name}", data)
        keys.append(f"{prefix}/{name}")
    return keys


def write_aggregate_artifacts(
    store: ArtifactStore, customer: str, run_id: str, aggregate: Mapping[str, Any]
) -> list[str]:
    """Write a run's aggregate report; returns the keys written.

    Each persona's `report.json` (for its ease chart) and the issues' screenshots are read
    back from the store; a session without them is still listed.
    """
    sessions: dict[str, Mapping[str, Any]] = {}
    for persona in aggregate["personas"]:
        sid = persona["session_id"]
        try:
            sessions[sid] = json.loads(
                store.get(f"{session_prefix(customer, run_id, sid)}/{REPORT_JSON}")
            )
        except ArtifactNotFound:
            continue

    def screenshot(session_id: str, name: str) -> bytes | None:
        return _loader(store, session_prefix(customer, run_id, session_id))(name)

    prefix = run_prefix(customer, run_id)
    files = {
        REPORT_JSON: dump_json(aggregate),
        REPORT_MD: render_aggregate_markdown(aggregate).encode(),
        REPORT_HTML: render_aggregate_html(aggregate, sessions, screenshot).encode(),
    }
    keys = []
    for name, data in files.items():
        store.put(f"{prefix}/{name}", data)
        keys.append(f"{prefix}/{name}")
    return keys
