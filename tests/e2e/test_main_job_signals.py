"""`make run` stops everything it started on SIGINT and SIGTERM, in the foreground and not.

Each case starts `make run ARGS=--serve` the way a person does (make, then `python -m demo`,
which starts the backend and Chromium), waits for a given step, sends a signal the way a shell
would, and checks that make exits within seconds and that no process it started is left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from ._skip import require_chromium

require_chromium()
pytestmark = [pytest.mark.browser, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
PROMPT_EXIT_S = 25  # cleanup waits at most 10 s per process it stops; this one should take ~1 s


def descendants(pid: int) -> set[int]:
    """Every live process below `pid`, by parent links in /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def users_of(folder: Path) -> list[int]:
    """Live processes whose command line names `folder` (Chromium's --user-data-dir)."""
    needle = str(folder).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if needle in (entry / "cmdline").read_bytes() and alive(int(entry.name)):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
    except OSError:
        return "?"


def start_make(tmp_path: Path, ignore_sigint: bool) -> subprocess.Popen[str]:
    def background_job() -> None:
        if ignore_sigint:
            # What a non-interactive shell does to `make run &`: the job ignores SIGINT.
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    args = f"--serve --headless --data-dir {tmp_path / 'data'}"
    return subprocess.Popen(
        ["/usr/bin/make", "-o", "bootstrap", "run", f"ARGS={args}"],  # bootstrap ran already
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # a process group of its own, as a shell's job
        preexec_fn=background_job,
    )


def read_until(make: subprocess.Popen[str], marker: str, timeout_s: float = 150) -> str:
    assert make.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = make.stdout.readline()
        if not line:
            break
        seen.append(line)
        if marker in line:
            return "".join(seen)
    pytest.fail(f"no {marker!r} in the output of make run:\n{''.join(seen)}")


@pytest.mark.parametrize(
    ("case", "marker", "signum", "to_group", "ignore_sigint"),
    [
        # `make run ARGS=--serve &`, then `kill -TERM <make's pid>`: make passes it on.
        ("background, kill -TERM make", "Ctrl-C stops everything", signal.SIGTERM, False, False),
        # Ctrl-C in the terminal: SIGINT to the whole foreground process group.
        ("foreground, Ctrl-C", "Ctrl-C stops everything", signal.SIGINT, True, False),
        # A script's `make run &` ignores SIGINT; `kill -INT -- -<pgid>` still stops it.
        ("background job ignoring SIGINT", "Ctrl-C stops everything", signal.SIGINT, True, True),
        # A signal in the middle of starting up: the browser is being launched.
        ("while starting, kill -TERM make", "start backend", signal.SIGTERM, False, False),
    ],
)
def test_make_run_stops_everything_it_started_on_a_signal(
    tmp_path: Path,
    case: str,
    marker: str,
    signum: signal.Signals,
    to_group: bool,
    ignore_sigint: bool,
) -> None:
    make = start_make(tmp_path, ignore_sigint)
    started: set[int] = set()
    try:
        output = read_until(make, marker)
        started = descendants(make.pid)
        commands = " | ".join(command(p) for p in started)
        assert "understudy.cli serve" in commands, commands
        if marker != "start backend":
            assert "chromium" in commands, commands
        sent = time.monotonic()
        if to_group:
            os.killpg(make.pid, signum)
        else:
            os.kill(make.pid, signum)
        rest, _ = make.communicate(timeout=PROMPT_EXIT_S)
        took = time.monotonic() - sent
        output += rest
        assert make.returncode != 0, output  # make reports the interrupted recipe
        assert f"Main job stopped by {signum.name}; nothing left running." in output, output
        left = [f"{p} {command(p)}" for p in started if alive(p)]
        assert left == [], f"{case}: left running after {took:.1f} s:\n" + "\n".join(left)
        # Also what started after the signal (a browser being launched): nothing uses the data.
        using = [f"{p} {command(p)}" for p in users_of(tmp_path / "data")]
        assert using == [], f"{case}: still running:\n" + "\n".join(using)
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGKILL)
            make.wait()
        for pid in (*started, *users_of(tmp_path / "data")):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
