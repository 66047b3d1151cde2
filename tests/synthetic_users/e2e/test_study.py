"""The study end to end: three personas on the demo shop through the public API, real Chromium.

Understudy, the demo shop and the Synthetic Users service run as separate processes on their
embedded defaults (`study/_stack.py`, what `make study` runs). The tests read only what a
customer can: the Synthetic Users API and the artifacts it serves; the shop's own log is the
witness of what the browsers did (which cookie each request carried).
"""

from __future__ import annotations

import gzip
import json
import time
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from demo.build import build_extension
from study.__main__ import PERSONAS, create_run, follow
from study._stack import StudyStack
from tests.e2e._skip import require_chromium

if TYPE_CHECKING:
    from collections.abc import Iterator

require_chromium()

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Which friction kinds of the aggregate report name each planted flaw of the shop.
KINDS_OF_FLAW = {
    "unlabeled-field": {"unlabeled_control"},
    "slow-step": {"slow_load"},
    "confusing-error": {"confusing_error"},
    "dead-link": {"dead_link", "error_page"},
    "missing-alt": {"missing_alt_text"},
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StudyStack]:
    build_extension()
    running = StudyStack(tmp_path_factory.mktemp("study"))
    try:
        yield running.start()
    finally:
        running.stop()


@pytest.fixture(scope="module")
def finished_run(stack: StudyStack) -> dict[str, Any]:
    return follow(stack, create_run(stack, PERSONAS), quiet=True)


def _get(stack: StudyStack, path: str) -> Any:
    with stack.client() as http:
        return http.get(path).raise_for_status()


def test_three_personas_complete_and_each_planted_flaw_is_found(
    stack: StudyStack, finished_run: dict[str, Any]
) -> None:
    run_id = finished_run["run_id"]
    assert finished_run["status"] == "completed"
    assert [s["status"] for s in finished_run["sessions"]] == ["completed"] * 3
    aggregate = _get(stack, f"/runs/{run_id}/report.json").json()
    assert {p["persona_name"] for p in aggregate["personas"]} == {p["name"] for p in PERSONAS}
    found = {issue["kind"]: issue for issue in aggregate["issues"]}
    for flaw, kinds in KINDS_OF_FLAW.items():
        assert kinds & set(found), f"no persona found {flaw}: issues {sorted(found)}"
    ranked = [issue["count"] for issue in aggregate["issues"]]
    assert ranked == sorted(ranked, reverse=True)
    assert 0.0 <= aggregate["task_success_rate"] <= 1.0
    html = _get(stack, f"/runs/{run_id}/report.html")
    assert html.headers["content-type"].startswith("text/html")
    for persona in PERSONAS:
        assert persona["name"] in html.text


def test_each_persona_has_a_transcript_reports_and_screenshots_of_its_reactions(
    stack: StudyStack, finished_run: dict[str, Any]
) -> None:
    run_id = finished_run["run_id"]
    for session in finished_run["sessions"]:
        base = f"/runs/{run_id}/sessions/{session['session_id']}"
        transcript = json.loads(gzip.decompress(_get(stack, f"{base}/transcript.json.gz").content))
        report = _get(stack, f"{base}/report.json").json()
        assert report["turns"] == len(transcript["turns"]) > 0
        assert report["persona"]["name"] == session["persona_name"]
        assert all(1 <= step["ease"] <= 7 for step in report["ease_per_step"])
        assert report["reactions"], f"{session['persona_name']} reacted to nothing"
        for reaction in report["reactions"]:
            shot = _get(stack, f"{base}/screenshots/{reaction['screenshot']}")
            assert shot.headers["content-type"] == "image/png"
            assert shot.content.startswith(b"\x89PNG")
        assert session["persona_name"] in _get(stack, f"{base}/report.md").text
        assert "<html" in _get(stack, f"{base}/report.html").text


def test_the_personas_own_email_is_masked_in_every_transcript_and_report(
    stack: StudyStack, finished_run: dict[str, Any]
) -> None:
    assert stack.shop is not None
    # The addresses the personas typed: each session's own inbox (or the heuristic's own).
    typed = {s.shipping.get("email", "") for s in stack.shop.sessions.values() if s.shipping}
    typed.discard("")
    assert typed, "no email was typed"
    run_id, placeholders = finished_run["run_id"], 0
    for session in finished_run["sessions"]:
        base = f"/runs/{run_id}/sessions/{session['session_id']}"
        texts = [gzip.decompress(_get(stack, f"{base}/transcript.json.gz").content).decode()]
        texts += [_get(stack, f"{base}/report.{ext}").text for ext in ("json", "md", "html")]
        for text in texts:
            assert "@example.test" not in text and "%40example.test" not in text
            for address in typed:
                assert address not in text and address.replace("@", "%40") not in text
        placeholders += texts[0].count("[persona inbox]")
    assert placeholders > 0  # the address was typed, and stored as the placeholder
    assert "@example.test" not in _get(stack, f"/runs/{run_id}/report.md").text


def test_personas_never_share_cookies(stack: StudyStack, finished_run: dict[str, Any]) -> None:
    assert stack.shop is not None
    names_by_cookie = {
        token: session.shipping.get("full_name")
        for token, session in stack.shop.sessions.items()
        if session.shipping
    }
    shoppers = [n for n in names_by_cookie.values() if n]
    assert shoppers, "no persona reached the shipping form"
    # One browser profile per persona: a shared cookie would merge two shoppers into one cart.
    assert len(shoppers) == len(set(shoppers))
    persona_words = {p["name"].split()[0].lower() for p in PERSONAS}
    assert all(any(word in name.lower() for word in persona_words) for name in shoppers)


def test_each_persona_types_its_own_inbox_and_order_confirmations_reach_it(
    stack: StudyStack, finished_run: dict[str, Any]
) -> None:
    assert stack.shop is not None
    addresses = {s["inbox_address"] for s in finished_run["sessions"]}
    assert len(addresses) == 3
    assert all(a.endswith("@inbox.localhost") for a in addresses)
    typed = {s.shipping.get("email") for s in stack.shop.sessions.values() if s.shipping}
    assert typed and typed <= addresses
    ordered = [
        s.shipping["email"]
        for s in stack.shop.sessions.values()
        if s.orders and s.shipping and s.shipping.get("email") in addresses
    ]
    assert ordered, "no persona placed an order"
    # The inbox's SMTP server accepted one confirmation for each order (it refuses unknown
    # addresses at RCPT), addressed to the persona that ordered.
    sent = [to for to, result in stack.shop.mail_log if to in addresses]
    assert sorted(sent) == sorted(ordered)
    assert all(result == "sent" for to, result in stack.shop.mail_log if to in addresses)


def test_a_run_resumes_after_the_service_is_killed_mid_run(stack: StudyStack) -> None:
    run_id = create_run(stack, PERSONAS[:2])
    deadline = time.monotonic() + 120
    with stack.client() as http:
        while True:
            run = http.get(f"/runs/{run_id}").raise_for_status().json()
            if any(s["turn"] >= 3 for s in run["sessions"]):
                break
            assert time.monotonic() < deadline, "the run never got going"
            time.sleep(0.2)
    before = {s["session_id"]: s for s in run["sessions"]}
    assert stack.synthetic_users is not None
    stack.synthetic_users.kill()  # SIGKILL: no shutdown code runs
    stack.restart_synthetic_users()
    resumed = follow(stack, run_id, quiet=True)
    assert resumed["status"] == "completed"
    for session in resumed["sessions"]:
        assert session["status"] == "completed", session.get("failure_reason")
        earlier = before[session["session_id"]]
        if earlier["status"] == "running":
            assert session["generation"] > earlier["generation"]
        kept = {(r["step"], r["note"]) for r in earlier["reactions"]}
        assert kept <= {(r["step"], r["note"]) for r in session["reactions"]}
        assert session["turn"] >= earlier["turn"]


def test_cancelling_a_run_closes_its_sessions_and_keeps_partial_reports(
    stack: StudyStack,
) -> None:
    run_id = create_run(stack, PERSONAS[:2])
    deadline = time.monotonic() + 120
    with stack.client() as http:
        while not any(
            s["turn"] >= 2
            for s in http.get(f"/runs/{run_id}").raise_for_status().json()["sessions"]
        ):
            assert time.monotonic() < deadline, "the run never got going"
            time.sleep(0.1)
        cancelled = http.delete(f"/runs/{run_id}")
        assert cancelled.status_code in (200, 202), cancelled.text
        run = follow(stack, run_id, quiet=True)
        assert run["status"] == "cancelled"
        while any(s["status"] in ("queued", "running") for s in run["sessions"]):
            assert time.monotonic() < deadline, f"sessions still going: {run['sessions']}"
            time.sleep(0.1)
            run = http.get(f"/runs/{run_id}").raise_for_status().json()
        assert {s["status"] for s in run["sessions"]} <= {"cancelled", "completed"}
        started = [s for s in run["sessions"] if s["turn"] > 0]
        for session in started:
            report = http.get(f"/runs/{run_id}/sessions/{session['session_id']}/report.json")
            assert report.status_code == 200, report.text
            assert report.json()["turns"] == session["turn"]
        assert http.get(f"/runs/{run_id}/report.json").status_code == 200
    # Every Understudy session of the run was closed: the fleet's devices hold no capacity.
    understudy = started_service(stack)
    key = (stack.root / "synthetic-users" / "understudy-api-key").read_text().strip()
    with httpx.Client(base_url=understudy, headers={"Authorization": f"Bearer {key}"}) as us:
        deadline = time.monotonic() + 30
        while any(d["usedCapacity"] for d in us.get("/v1/devices").json()["devices"]):
            assert time.monotonic() < deadline, "a cancelled run's session still holds a device"
            time.sleep(0.2)


def started_service(stack: StudyStack) -> str:
    assert stack.understudy is not None
    return stack.understudy.base_url


def test_the_service_says_loudly_that_loopback_targets_are_allowed(stack: StudyStack) -> None:
    # The demo shop is on 127.0.0.1: only the operator setting lets it be a target.
    log = (stack.root / "synthetic-users.log").read_text()
    assert "SYNTHETIC_USERS_ALLOW_LOOPBACK_TARGETS is on" in log
