"""Crash recovery by generation: a persona's Chromium is SIGKILLed mid-run, real stack.

The fleet's browser of a running persona is killed (its whole process group, as an OOM kill
would); the persona session must go on in a new generation on a fresh profile, keep every
generation's reactions, tell the persona what it noted before (the heuristic persona reacts once
per problem, so a repeated note would show it was not told), and after the bound on generations
end as `failed` with the reason while the run still completes.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import time
from typing import TYPE_CHECKING, Any

import pytest

from demo.build import build_extension
from study.__main__ import PERSONAS, create_run, follow
from study._stack import StudyStack
from tests.e2e._skip import require_chromium

if TYPE_CHECKING:
    from collections.abc import Iterator

require_chromium()

pytestmark = [pytest.mark.browser, pytest.mark.slow]

MAX_GENERATIONS = 3
KILL_AFTER_TURNS = 2  # turns of a generation before its browser is killed
WAIT_S = 120.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StudyStack]:
    build_extension()
    running = StudyStack(
        tmp_path_factory.mktemp("crash"),
        max_browsers=1,
        extra_env={"SYNTHETIC_USERS_MAX_GENERATIONS": str(MAX_GENERATIONS)},
    )
    try:
        yield running.start()
    finally:
        running.stop()


def kill_browser_during(stack: StudyStack, run_id: str, generations: list[int]) -> list[int]:
    """SIGKILL the persona's browser once in each of these generations; returns the turns."""
    killed_at: list[int] = []
    deadline = time.monotonic() + WAIT_S
    started_turn: dict[int, int] = {}
    with stack.client() as http:
        while generations:
            assert time.monotonic() < deadline, f"generations {generations} never ran"
            (session,) = http.get(f"/runs/{run_id}").raise_for_status().json()["sessions"]
            generation, turn = session["generation"], session["turn"]
            assert session["status"] in ("queued", "running"), session
            started_turn.setdefault(generation, turn)
            if generation == generations[0] and turn >= started_turn[generation] + KILL_AFTER_TURNS:
                pids = stack.browser_pids()
                assert len(pids) == 1, pids  # one persona, one browser
                os.killpg(next(iter(pids.values())), signal.SIGKILL)
                killed_at.append(turn)
                generations.pop(0)
            time.sleep(0.05)
    return killed_at


def artifacts(stack: StudyStack, run_id: str, session_id: str) -> tuple[dict[str, Any], Any]:
    base = f"/runs/{run_id}/sessions/{session_id}"
    with stack.client() as http:
        report = http.get(f"{base}/report.json").raise_for_status().json()
        transcript = json.loads(
            gzip.decompress(http.get(f"{base}/transcript.json.gz").raise_for_status().content)
        )
    return report, transcript


def test_a_persona_whose_browser_is_killed_twice_finishes_in_its_third_generation(
    stack: StudyStack,
) -> None:
    # The high-literacy, patient persona: it completes the purchase despite the shop's flaws,
    # so its success after two crashes shows the third generation really shopped.
    run_id = create_run(stack, PERSONAS[2:3])
    killed_at = kill_browser_during(stack, run_id, [1, 2])
    run = follow(stack, run_id, quiet=True)
    assert run["status"] == "completed"
    (session,) = run["sessions"]
    assert session["status"] == "completed", session.get("failure_reason")
    assert session["generation"] == MAX_GENERATIONS
    report, transcript = artifacts(stack, run_id, session["session_id"])
    assert report["generations"] == MAX_GENERATIONS
    assert report["status"] == "completed" and report["task_success"]["success"]
    turns = transcript["turns"]
    assert sorted({t["generation"] for t in turns}) == [1, 2, 3]
    # The turn count goes on across generations, with no turn recorded twice.
    assert [t["turn"] for t in turns] == list(range(1, len(turns) + 1))
    assert max(t["turn"] for t in turns if t["generation"] == 1) <= killed_at[0] + 1
    # Reactions of the crashed generations are kept in the report ...
    kept = {r["generation"] for r in report["reactions"]}
    assert 1 in kept, report["reactions"]
    # ... and were told to the persona: it never noted the same problem again.
    notes = [r["note"] for r in report["reactions"]]
    assert len(notes) == len(set(notes)), notes


def test_past_the_bound_on_generations_the_session_fails_and_the_run_completes(
    stack: StudyStack,
) -> None:
    run_id = create_run(stack, PERSONAS[1:2])
    kill_browser_during(stack, run_id, list(range(1, MAX_GENERATIONS + 1)))
    run = follow(stack, run_id, quiet=True)
    assert run["status"] == "completed"
    (session,) = run["sessions"]
    assert session["status"] == "failed"
    assert f"at most {MAX_GENERATIONS} generations" in session["failure_reason"]
    report, transcript = artifacts(stack, run_id, session["session_id"])
    assert report["status"] == "failed"
    assert f"at most {MAX_GENERATIONS} generations" in report["failure_reason"]
    assert not report["task_success"]["success"]
    assert sorted({t["generation"] for t in transcript["turns"]}) == [1, 2, 3]
    with stack.client() as http:
        aggregate = http.get(f"/runs/{run_id}/report.json").raise_for_status().json()
    assert aggregate["task_success_rate"] == 0.0
