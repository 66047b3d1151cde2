"""Artifact downloads: the right content type when the file exists, `404` with a code before."""

from __future__ import annotations

import gzip
import json

import pytest

from synthetic_users._artifacts import run_prefix, session_prefix
from tests.synthetic_users.api.conftest import Api, problem

SESSION_FILES = {
    "transcript.json.gz": "application/gzip",
    "report.json": "application/json",
    "report.md": "text/markdown; charset=utf-8",
    "report.html": "text/html; charset=utf-8",
}
RUN_FILES = {name: t for name, t in SESSION_FILES.items() if name != "transcript.json.gz"}
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


async def _run_and_session(api: Api) -> tuple[str, str]:
    run_id = (await api.create_run()).json()["run_id"]
    return run_id, api.store.sessions(run_id)[0].session_id


@pytest.mark.parametrize("name", sorted(SESSION_FILES))
async def test_a_session_artifact_is_404_until_written_then_served_as_its_type(
    api: Api, name: str
) -> None:
    run_id, sid = await _run_and_session(api)
    url = f"/runs/{run_id}/sessions/{sid}/{name}"
    body = problem(await api.client.get(url, headers=api.auth()), 404, "artifact_not_found")
    assert "when the session ends" in body["detail"]
    data = (
        gzip.compress(b'{"turns": []}') if name.endswith(".gz") else b"content of " + name.encode()
    )
    api.artifacts.put(f"{session_prefix('acme', run_id, sid)}/{name}", data)
    response = await api.client.get(url, headers=api.auth())
    assert response.status_code == 200
    assert response.headers["content-type"] == SESSION_FILES[name]
    assert response.headers["x-content-type-options"] == "nosniff"
    assert "default-src 'none'" in response.headers["content-security-policy"]
    assert response.content == data  # a .gz stays compressed: no Content-Encoding
    assert "content-encoding" not in response.headers


async def test_the_transcript_downloads_as_a_gzip_file(api: Api) -> None:
    run_id, sid = await _run_and_session(api)
    transcript = {"run_id": run_id, "turns": []}
    api.artifacts.put(
        f"{session_prefix('acme', run_id, sid)}/transcript.json.gz",
        gzip.compress(json.dumps(transcript).encode()),
    )
    response = await api.client.get(
        f"/runs/{run_id}/sessions/{sid}/transcript.json.gz", headers=api.auth()
    )
    assert json.loads(gzip.decompress(response.content)) == transcript
    assert "attachment" in response.headers["content-disposition"]


@pytest.mark.parametrize("name", sorted(RUN_FILES))
async def test_the_aggregate_report_is_404_until_written_then_served(api: Api, name: str) -> None:
    run_id, _ = await _run_and_session(api)
    url = f"/runs/{run_id}/{name}"
    problem(await api.client.get(url, headers=api.auth()), 404, "artifact_not_found")
    api.artifacts.put(f"{run_prefix('acme', run_id)}/{name}", b"aggregate")
    response = await api.client.get(url, headers=api.auth())
    assert response.status_code == 200
    assert response.headers["content-type"] == RUN_FILES[name]
    assert response.content == b"aggregate"


async def test_a_screenshot_is_a_png_once_it_exists(api: Api) -> None:
    run_id, sid = await _run_and_session(api)
    url = f"/runs/{run_id}/sessions/{sid}/screenshots/step-0004.png"
    problem(await api.client.get(url, headers=api.auth()), 404, "artifact_not_found")
    api.artifacts.put(f"{session_prefix('acme', run_id, sid)}/screenshots/step-0004.png", PNG)
    response = await api.client.get(url, headers=api.auth())
    assert response.status_code == 200
    assert response.headers["content-type"] == "image/png"
    assert response.content == PNG


@pytest.mark.parametrize("name", ["step-0004.jpg", "..%2Freport.json", ".hidden.png"])
async def test_a_screenshot_name_outside_the_pattern_is_not_found(api: Api, name: str) -> None:
    run_id, sid = await _run_and_session(api)
    api.artifacts.put(f"{session_prefix('acme', run_id, sid)}/report.json", b"{}")
    response = await api.client.get(
        f"/runs/{run_id}/sessions/{sid}/screenshots/{name}", headers=api.auth()
    )
    assert response.status_code == 404
    assert response.json()["code"] in ("artifact_not_found", "not_found")


async def test_artifacts_of_an_unknown_run_or_session_say_which(api: Api) -> None:
    run_id, sid = await _run_and_session(api)
    unknown_run = f"/runs/run_{'1' * 32}/sessions/{sid}/report.json"
    problem(await api.client.get(unknown_run, headers=api.auth()), 404, "run_not_found")
    unknown_session = f"/runs/{run_id}/sessions/ses_{'1' * 32}/report.json"
    problem(await api.client.get(unknown_session, headers=api.auth()), 404, "session_not_found")
    problem(
        await api.client.get(f"/runs/run_{'1' * 32}/report.html", headers=api.auth()),
        404,
        "run_not_found",
    )


async def test_another_customers_artifacts_are_not_found(api: Api) -> None:
    run_id, sid = await _run_and_session(api)
    api.artifacts.put(f"{session_prefix('acme', run_id, sid)}/report.json", b"{}")
    response = await api.client.get(
        f"/runs/{run_id}/sessions/{sid}/report.json", headers=api.auth(api.other_key)
    )
    problem(response, 404, "run_not_found")
