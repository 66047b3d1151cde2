"""`python -m demo` (`make run`): the main job on the embedded default, start to finish.

It builds the extension, starts the backend (`understudy serve`, SQLite, one process), creates an
API key, enrolls a local device and vaults a password, launches Chromium with the extension
(headless unless a display is present), then drives a governed workflow against the bundled demo
site through the connector: create an unattended session, navigate, snapshot, fill the username,
fill the password with `fill_secret`, click "Sign in", read the page behind the login, delete the
session. Each step prints its status and latency; everything started is stopped at the end.
`--serve` keeps the backend (and the browser) running for manual use.

SIGINT, SIGTERM and SIGHUP stop it the same way at any step, in the foreground (Ctrl-C) or in the
background (`make run ARGS=--serve &`, then `kill -TERM` to make or to this process): the main
task is cancelled, the browser and the backend, which run in sessions of their own so a
terminal's Ctrl-C reaches only this process, are stopped, the temporary data directory removed,
and the exit status is 128 + the signal's number.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from demo.build import DIST, EXTENSION, build_extension, free_port
from demo.chromium import CHROMIUM, enroll, launch
from demo.site import USERNAME, DemoSite
from understudy_connector import AuditEvent, Client, find_ref

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from demo.chromium import Chromium

ROOT = Path(__file__).resolve().parent.parent
EXTENSION_ID = re.search(
    r'EXTENSION_ID = "([a-p]{32})"', (EXTENSION / "src" / "extensionId.ts").read_text()
).group(1)  # type: ignore[union-attr]
TENANT = "demo"
DEVICE = "local-chromium"
SECRET = "demo-password"  # noqa: S105 - the vault entry's name, not a password
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass
class Step:
    name: str
    status: str
    seconds: float
    detail: str = ""


@dataclass
class Report:
    steps: list[Step] = field(default_factory=list)
    last_http: list[int] = field(default_factory=list)

    def audit(self, event: AuditEvent) -> None:
        """The connector's audit hook: remember the HTTP status of each response."""
        if event.stage == "response" and event.http_status is not None:
            self.last_http.append(event.http_status)

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[Step]:
        self.last_http.clear()
        record = Step(name, "…", 0.0)
        start = time.perf_counter()
        try:
            yield record
        except BaseException as exc:
            record.status = "FAILED"
            record.detail = record.detail or f"{type(exc).__name__}: {exc}"
            raise
        finally:
            record.seconds = time.perf_counter() - start
            if record.status == "…":
                record.status = str(self.last_http[-1]) if self.last_http else "ok"
            self.steps.append(record)
            _print_step(record)


def _print_step(step: Step) -> None:
    latency = f"{step.seconds * 1000:8.0f} ms" if step.seconds < 10 else f"{step.seconds:8.1f} s "
    print(f"  {step.name:<28} {step.status:<8} {latency}  {step.detail}", flush=True)


def _run(*argv: str, stdin: str | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def _cli_env(data_dir: Path, port: int) -> dict[str, str]:
    return {
        **os.environ,
        "UNDERSTUDY_DATA_DIR": str(data_dir),
        "UNDERSTUDY_PORT": str(port),
        "UNDERSTUDY_HOST": "127.0.0.1",
        "UNATTENDED_ENABLED_TENANTS": f'["{TENANT}"]',
    }


def _understudy(env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    return _run(sys.executable, "-m", "understudy.cli", *args, stdin=stdin, env=env)


def _token(output: str, label: str) -> str:
    match = re.search(rf"^{label}:\s+(\S+)$", output, re.MULTILINE)
    if match is None:
        raise RuntimeError(f"no {label!r} in the CLI output")
    return match.group(1)


async def _wait(predicate: Callable[[], Any], what: str, timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(httpx.HTTPError):
            value = predicate()
            if value:
                return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not happen within {timeout_s:.0f} s")
        await asyncio.sleep(0.1)


async def main_job(args: argparse.Namespace) -> int:
    report = Report()
    stack = contextlib.ExitStack()
    data_dir = (
        Path(args.data_dir) if args.data_dir else Path(tempfile.mkdtemp(prefix="understudy-"))
    )
    if not args.data_dir:
        stack.callback(shutil.rmtree, data_dir, ignore_errors=True)
    port = args.port or free_port()
    env = _cli_env(data_dir, port)
    base_url = f"http://127.0.0.1:{port}"
    browser: Chromium | None = None
    started = time.perf_counter()
    print(f"Understudy main job — SQLite in {data_dir}, backend on {base_url}\n", flush=True)
    try:
        with report.step("build extension") as step:
            step.detail = build_extension()
        with report.step("enroll key, device, secret") as step:
            _understudy(env, "migrate")  # only migrate and serve create a database
            api_key = _token(
                _understudy(env, "keys", "create", "--tenant", TENANT, "--actor", "main-job"),
                "api key",
            )
            credential = _token(
                _understudy(env, "devices", "enroll", "--tenant", TENANT, "--device", DEVICE),
                "credential",
            )
            password = secrets.token_urlsafe(12)
            _understudy(env, "secrets", "put", "--tenant", TENANT, "--name", SECRET, stdin=password)
            step.detail = f"tenant {TENANT}, device {DEVICE}, vault:{SECRET}"
        with report.step("start demo site") as step:
            site = DemoSite(password).start()
            stack.callback(site.stop)
            step.detail = site.origin
        with report.step("start backend") as step:
            log = (data_dir / "backend.log").open("w")
            stack.callback(log.close)
            backend = subprocess.Popen(  # noqa: ASYNC220 - returns at once
                [sys.executable, "-m", "understudy.cli", "serve"],
                env=env,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            stack.callback(_stop_process, backend)
            await _wait(
                lambda: httpx.get(f"{base_url}/readyz").status_code == 200, "backend readiness", 20
            )
            step.detail = f"{base_url} (API reference at {base_url}/docs)"
        if not CHROMIUM.exists():
            raise RuntimeError(
                f"{CHROMIUM} is missing: run scripts/bootstrap (as root it installs "
                "Debian's chromium)"
            )
        headless = args.headless or not os.environ.get("DISPLAY")
        with report.step("launch chromium") as step:
            browser = await launch(data_dir / "profile", DIST, headless=headless)
            stack.callback(browser.kill)
            await enroll(
                browser,
                f"chrome-extension://{EXTENSION_ID}",
                {
                    "serviceOrigin": base_url,
                    "deviceId": DEVICE,
                    "credential": credential,
                    "enabled": True,
                    "localOriginPolicy": {"mode": "allowlist", "origins": [site.origin]},
                },
            )
            step.detail = "headless" if headless else "headed"
        client = Client(base_url, api_key, audit=report.audit)
        stack.callback(client.close)
        with report.step("device online") as step:

            def online() -> bool:
                return any(d.online for d in client.list_devices().devices)

            await _wait(online, "the extension's device connection", 30)
        await _in_daemon_thread(_workflow, client, site, report)
        if args.serve:
            print(
                f"\nServing: API reference {base_url}/docs, API key {api_key}\n"
                "Ctrl-C stops everything.",
                flush=True,
            )
            await asyncio.Event().wait()  # until a signal cancels the task
    except Exception as exc:
        print(f"\nThe main job stopped: {exc}", file=sys.stderr)
        return _summary(report, started, ok=False)
    finally:
        stack.close()
    return _summary(report, started, ok=True)


def _workflow(client: Client, site: DemoSite, report: Report) -> None:
    with report.step("create session") as step:
        session = client.session(
            allowed_origins=[site.origin], profile_state_key="main-job", audit=report.audit
        ).open()
        step.detail = f"unattended, {session.info.device_id if session.info else '?'}"
    try:
        with report.step("navigate") as step:
            page = session.navigate(f"{site.origin}/login")
            step.detail = page.title
        with report.step("snapshot") as step:
            form = session.snapshot(interactive_only=True)
            step.detail = f"{len(form.nodes)} nodes, generation {form.generation}"
        user = find_ref(form, role="textbox", name="username")
        password = find_ref(form, role="textbox", name="password")
        sign_in = find_ref(form, role="button", name="sign in")
        with report.step("fill username") as step:
            session.fill(user, USERNAME)
        with report.step("fill_secret password") as step:
            session.fill_secret(password, f"vault:{SECRET}")
            step.detail = f"vault:{SECRET} (plaintext never leaves the backend)"
        with report.step("click sign in") as step:
            session.click(sign_in)
        with report.step("wait for welcome") as step:
            session.wait_for(text="Welcome", timeout_ms=10_000)
        with report.step("read the result") as step:
            page_after = session.snapshot()
            heading = next((n.name for n in page_after.nodes if n.role == "heading"), "")
            step.detail = f"{page_after.url} — {heading!r}"
            if not site.logins or not site.logins[-1]:
                raise RuntimeError("the demo site did not accept the sign-in")
    finally:
        with report.step("delete session") as step:
            ended = session.close()
            step.detail = getattr(ended, "status", "") or ""


def _summary(report: Report, started: float, *, ok: bool) -> int:
    failed = [s for s in report.steps if s.status == "FAILED"]
    total = time.perf_counter() - started
    verdict = "completed" if ok and not failed else "FAILED"
    print(
        f"\nMain job {verdict}: {len(report.steps)} steps in {total:.1f} s"
        f"{'' if ok and not failed else ' — see the step marked FAILED above'}; "
        "nothing left running.",
        flush=True,
    )
    return 0 if ok and not failed else 1


async def _in_daemon_thread(function: Callable[..., object], *args: object) -> None:
    """Run blocking `function` in a daemon thread and wait for it.

    Not `asyncio.to_thread`: when a signal cancels the wait, `asyncio.run` would then block until
    the executor's thread returns, and a connector call can wait for tens of seconds. A daemon
    thread is left behind instead; its backend and browser are gone by then, so it fails fast,
    and it cannot keep the process alive.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def settle(error: BaseException | None) -> None:
        if done.done():
            return
        if error is None:
            done.set_result(None)
        else:
            done.set_exception(error)

    def body() -> None:
        try:
            function(*args)
        except BaseException as exc:  # handed to the awaiting task, which re-raises it
            loop.call_soon_threadsafe(settle, exc)
        else:
            loop.call_soon_threadsafe(settle, None)

    threading.Thread(target=body, name="main-job-workflow", daemon=True).start()
    await done


async def _until_signal(args: argparse.Namespace) -> int:
    """`main_job`, cancelled (and so cleaned up) by the first stop signal; 128 + its number then."""
    loop = asyncio.get_running_loop()
    received: list[int] = []

    def stop(signum: int) -> None:
        if not received:
            print(f"\n{signal.Signals(signum).name}: stopping everything …", flush=True)
        received.append(signum)
        job.cancel()

    job = asyncio.ensure_future(main_job(args))
    for signum in STOP_SIGNALS:
        # Also when the shell started us with SIGINT ignored (a background job without job
        # control): `kill -INT` is then still a request to stop.
        loop.add_signal_handler(signum, stop, signum)
    try:
        return await job
    except asyncio.CancelledError:
        if not received:
            raise
        name = signal.Signals(received[0]).name
        print(f"Main job stopped by {name}; nothing left running.", flush=True)
        return 128 + received[0]
    finally:
        for signum in STOP_SIGNALS:
            loop.remove_signal_handler(signum)


def _stop_process(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__.splitlines()[0])
    parser.add_argument("--serve", action="store_true", help="keep the service running afterwards")
    parser.add_argument("--headless", action="store_true", help="headless even with a display")
    parser.add_argument("--port", type=int, help="backend port (default: a free one)")
    parser.add_argument("--data-dir", help="keep SQLite and the profile here (default: a temp dir)")
    return asyncio.run(_until_signal(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
