"""`python -m study` (`make study`): Synthetic Users' main job on the embedded default.

It builds the extension, starts Understudy (SQLite), the bundled demo shop and the Synthetic Users
service (SQLite, a browser fleet of local Chromium profiles, the offline heuristic persona), then
runs a study through the public API: three personas of low, medium and high digital literacy try
to buy a rain jacket, in parallel, each in its own browser profile. Progress per persona prints as
it happens; at the end it prints what each persona found and the path of the aggregate
`report.html`, and stops everything it started. The data stays in `--data-dir` (default
`.study/`, replaced on each run) so the reports can be opened afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from demo.build import ROOT, build_extension
from study._stack import CUSTOMER, StudyStack, started
from study.shop import FLAWS

TASK = "Buy a rain jacket and have it delivered to your home."
TURN_BUDGET = 40
PERSONAS: list[dict[str, Any]] = [
    {
        "name": "Rosa Lindqvist",
        "background": "Retired teacher who shops online with her grandson's help.",
        "goals": ["check the shipping and returns rules before paying"],
        "digital_literacy": "low",
        "patience": "low",
        "device": "desktop",
        "locale": "en-GB",
    },
    {
        "name": "Sam Okafor",
        "background": "Nurse on shifts; buys things on the way home.",
        "goals": ["get it quickly"],
        "digital_literacy": "medium",
        "patience": "medium",
        "device": "desktop",
        "locale": "en-US",
    },
    {
        "name": "Lee Marten",
        "background": "Software tester who notices sloppy details.",
        "goals": ["pay without surprises"],
        "digital_literacy": "high",
        "patience": "high",
        "device": "desktop",
        "locale": "en-GB",
    },
]
POLL_S = 0.5
RUN_TIMEOUT_S = 600.0


def create_run(stack: StudyStack, personas: list[dict[str, Any]]) -> str:
    """POST /runs for the study's task against the demo shop; returns the run id."""
    shop = started(stack.shop, "the demo shop")
    with stack.client() as http:
        created = http.post(
            "/runs",
            json={
                "target_url": shop.url("/"),
                "task": TASK,
                "personas": personas,
                "turn_budget": TURN_BUDGET,
            },
            headers={"Idempotency-Key": str(uuid.uuid4())},
        )
    if created.status_code not in (201, 202):
        raise RuntimeError(f"POST /runs answered {created.status_code}: {created.text}")
    run_id: str = created.json()["run_id"]
    return run_id


def follow(stack: StudyStack, run_id: str, *, quiet: bool = False) -> dict[str, Any]:
    """Poll the run until it ends, printing each persona's progress as it changes."""
    seen: dict[str, tuple[Any, ...]] = {}
    deadline = time.monotonic() + RUN_TIMEOUT_S
    with stack.client() as http:
        while True:
            run: dict[str, Any] = http.get(f"/runs/{run_id}").raise_for_status().json()
            for s in run["sessions"]:
                state = (s["status"], s["turn"], s["generation"], len(s["reactions"]))
                if not quiet and seen.get(s["session_id"]) != state:
                    seen[s["session_id"]] = state
                    print(
                        f"  {s['persona_name']:<16} {s['status']:<10} turn {s['turn']:>2}  "
                        f"generation {s['generation']}  reactions {len(s['reactions'])}",
                        flush=True,
                    )
            if run["status"] in {"completed", "cancelled", "failed"}:
                return run
            if time.monotonic() > deadline:
                raise RuntimeError(f"run {run_id} did not end in {RUN_TIMEOUT_S:.0f} s")
            time.sleep(POLL_S)


def aggregate_path(stack: StudyStack, run_id: str) -> Path:
    return (
        stack.root
        / "synthetic-users"
        / "artifacts"
        / "customers"
        / CUSTOMER
        / "runs"
        / run_id
        / "report.html"
    )


def summary(stack: StudyStack, run_id: str) -> str:
    with stack.client() as http:
        aggregate = http.get(f"/runs/{run_id}/report.json").raise_for_status().json()
    lines = [
        f"Task success {aggregate['task_success_rate'] * 100:.0f}% across "
        f"{len(aggregate['personas'])} personas; median ease "
        f"{aggregate.get('median_ease', 'n/a')} of 7.",
    ]
    for persona in aggregate["personas"]:
        tokens = persona.get("tokens") or {}
        verdict = "done" if persona.get("success") else "not done"
        lines.append(
            f"  {persona['persona_name']:<16} task {verdict:<8} {persona.get('turns', 0):>3} turns "
            f"{tokens.get('input_tokens', 0) + tokens.get('output_tokens', 0):>6} tokens  "
            f"{persona.get('summary', '')}"
        )
    lines.append("Issues, by how many personas met them:")
    for issue in aggregate["issues"]:
        lines.append(f"  {issue['count']} x {issue['title']}")
    return "\n".join(lines)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m study", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=str(ROOT / ".study"), help="replaced on each run")
    parser.add_argument(
        "--serve", action="store_true", help="keep the services up afterwards (the dashboard)"
    )
    args = parser.parse_args(argv)
    # SIGTERM stops the study like Ctrl-C does: in the main thread, through the cleanup below
    # (its default would end the process and leave the services and browsers running).
    signal.signal(signal.SIGTERM, _interrupt)
    root = Path(args.data_dir)
    shutil.rmtree(root, ignore_errors=True)
    began = time.perf_counter()
    print(f"Synthetic Users study — data in {root}", flush=True)
    print(f"  extension: {build_extension()}", flush=True)
    stack = StudyStack(root)
    try:
        stack.start()
        shop, understudy = started(stack.shop, "shop"), started(stack.understudy, "Understudy")
        print(
            f"  Understudy {understudy.base_url}, demo shop {shop.origin}, "
            f"Synthetic Users {stack.url}",
            flush=True,
        )
        if stack.synthetic_users_env().get("SYNTHETIC_USERS_ALLOW_LOOPBACK_TARGETS") == "1":
            # The shop listens on 127.0.0.1, which a real service refuses as a target (SSRF).
            print(
                "  ! SYNTHETIC_USERS_ALLOW_LOOPBACK_TARGETS=1: loopback targets (http and https "
                "on 127.0.0.0/8, ::1, localhost) are allowed, for this local study only",
                flush=True,
            )
        print(f"  planted flaws: {', '.join(FLAWS)}\n", flush=True)
        run_id = create_run(stack, PERSONAS)
        print(f"Run {run_id}: {len(PERSONAS)} personas, task {TASK!r}", flush=True)
        run = follow(stack, run_id)
        print(f"\nRun {run['status']} in {time.perf_counter() - began:.0f} s.", flush=True)
        print(summary(stack, run_id), flush=True)
        print(f"\nAggregate report: {aggregate_path(stack, run_id)}", flush=True)
        if args.serve:
            print(
                f"\nServing: dashboard {stack.url}/dashboard (sign in with API key "
                f"{stack.api_key}), API reference {stack.url}/docs. Ctrl-C stops everything.",
                flush=True,
            )
            with contextlib.suppress(KeyboardInterrupt):
                while True:
                    signal.pause()
    except KeyboardInterrupt:
        print("\nInterrupted; stopping everything.", file=sys.stderr)
        return 130
    except Exception as exc:
        print(f"\nThe study stopped: {exc}", file=sys.stderr)
        return 1
    finally:
        stack.stop()
    print("Nothing left running.", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
