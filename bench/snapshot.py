"""Snapshot size for a model's context: Understudy's compact snapshot vs Playwright's ai snapshot.

Method:

1. Pages no one here wrote, from Debian packages, served over HTTP on 127.0.0.1 (one origin, a
   thread of this process, files as they are on disk): the Python library reference from
   ``python3.11-doc`` (``/usr/share/doc/python3.11/html/library/``) and the form-heavy Bootstrap
   examples from ``libjs-bootstrap5-doc`` (``/usr/share/doc/libjs-bootstrap5/examples/``: a
   checkout form, a sign-in form, the component cheatsheet, ...). A package that is missing is
   installed with apt-get when the run is root (as ``scripts/bootstrap`` installs Chromium);
   otherwise its pages are skipped, and the report says so.
2. Understudy side (``bench._chromium``): an `understudy serve` subprocess and a headless Debian
   Chromium with the built extension enrolled as its device; one unattended session; per page
   ``navigate`` (waits for ``load``), then ``snapshot`` with ``format: compact`` and ``maxNodes``
   5000 (the spec's largest bound), through ``POST /v1/sessions/{id}/commands``. Measured: the
   characters of the result's ``text``, header included.
3. Playwright side: a second headless Chromium with the same flags and no extension, driven by
   Playwright over CDP; per page ``page.goto(url)`` (waits for ``load``), then
   ``page.aria_snapshot(mode="ai")``, Playwright's snapshot for AI agents (refs on elements).
   Measured: the characters of the string it returns.
4. Reported per page: characters on both sides, approximate tokens (characters / 4: an
   approximation, no tokenizer was run), the ratio Understudy / Playwright, and, to check that
   being shorter lost nothing a model acts on, the controls in Playwright's snapshot (lines of a
   control role with a ref) next to the distinct refs in Understudy's text.

Target: every page's ratio <= 0.5.
"""

from __future__ import annotations

import asyncio
import mimetypes
import os
import re
import shutil
import subprocess
import threading
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote, urlsplit

from playwright.async_api import async_playwright

from bench._chromium import chromium_rig, plain_chromium
from bench._report import Table, Target, fmt

if TYPE_CHECKING:
    from collections.abc import Callable

    from bench._context import Context
    from bench._http import HttpConnection

CHARS_PER_TOKEN: Final = 4  # an approximation for English text and markup, not a tokenizer
TARGET_RATIO: Final = 0.5
MAX_NODES: Final = 5000
SNAPSHOT_TIMEOUT_S: Final = 60.0


@dataclass(frozen=True)
class PageSet:
    """Pages of one Debian package, served under `prefix`."""

    package: str
    root: Path
    prefix: str
    quick: tuple[str, ...]
    full: tuple[str, ...]


PAGE_SETS: Final = (
    PageSet(
        "python3.11-doc",
        Path("/usr/share/doc/python3.11/html"),
        "/python",
        quick=("library/json.html",),
        full=(
            "library/json.html",
            "library/functions.html",
            "library/argparse.html",
            "library/pathlib.html",
            "library/string.html",
        ),
    ),
    PageSet(
        "libjs-bootstrap5-doc",
        Path("/usr/share/doc/libjs-bootstrap5/examples"),
        "/bootstrap",
        quick=("checkout/index.html",),
        full=(
            "checkout/index.html",
            "sign-in/index.html",
            "cheatsheet/index.html",
            "dropdowns/index.html",
            "navbars/index.html",
        ),
    ),
)

# Roles of the controls a model acts on, as Playwright's ai snapshot names them.
CONTROL_ROLES: Final = frozenset(
    {
        "button", "checkbox", "combobox", "link", "listbox", "menuitem", "menuitemcheckbox",
        "menuitemradio", "option", "radio", "searchbox", "slider", "spinbutton", "switch", "tab",
        "textbox", "treeitem",
    }
)  # fmt: skip
PLAYWRIGHT_CONTROL = re.compile(r"^\s*- (\w+)\b.*\[ref=", re.MULTILINE)
UNDERSTUDY_REF = re.compile(r"g\d+e\d+")


def _ensure_package(page_set: PageSet, log: Callable[[str], None]) -> str | None:
    """None when the pages are there (installing them if we may); else why they are skipped."""
    if page_set.root.is_dir():
        return None
    apt = shutil.which("apt-get")
    if os.geteuid() != 0 or apt is None:
        return (
            f"{page_set.root} is missing; install it as root with: apt-get install "
            f"{page_set.package}"
        )
    log(f"snapshot: {page_set.package} missing, installing it with apt-get")
    environ = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (
        [apt, "-o", "DPkg::Lock::Timeout=600", "update", "-qq"],
        [apt, "-o", "DPkg::Lock::Timeout=600", "install", "-y", "-qq", page_set.package],
    ):
        done = subprocess.run(argv, env=environ, capture_output=True, check=False)  # noqa: S603
        if done.returncode != 0:
            return f"apt-get could not install {page_set.package}: {done.stderr[-300:]!r}"
    return None if page_set.root.is_dir() else f"{page_set.root} still missing after apt-get"


class DocPages:
    """Directories of page sets served on 127.0.0.1, each under its prefix, from a thread."""

    def __init__(self, sets: list[PageSet]) -> None:
        roots = {s.prefix: s.root.resolve() for s in sets}

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                data, kind = self._find(unquote(urlsplit(self.path).path))
                self.send_response(200 if data is not None else 404)
                body = data if data is not None else b"not found"
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def _find(self, path: str) -> tuple[bytes | None, str]:
                for prefix, root in roots.items():
                    if not path.startswith(prefix + "/"):
                        continue
                    file = (root / path.removeprefix(prefix + "/")).resolve()
                    if file.is_relative_to(root) and file.is_file():
                        kind = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
                        if kind.startswith("text/"):
                            kind += "; charset=utf-8"
                        return file.read_bytes(), kind
                return None, "text/plain; charset=utf-8"

            def log_message(self, format: str, *args: Any) -> None:
                del format, args  # quiet

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        first = sets[0]
        self.url = f"{self.origin}{first.prefix}/{first.quick[0]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)


async def _command(
    connection: HttpConnection, session_id: str, command: dict[str, Any]
) -> dict[str, Any]:
    body = {"commandId": str(uuid.uuid4()), "command": command}
    path = f"/v1/sessions/{session_id}/commands"
    deadline = asyncio.get_running_loop().time() + SNAPSHOT_TIMEOUT_S
    while True:
        reply = await connection.post_json(path, body)
        outcome = reply.json() if reply.status in (200, 202) else None
        if reply.status == 200 and outcome is not None and outcome.get("status") == "succeeded":
            result: dict[str, Any] = outcome["result"]
            return result
        # 503 until the session's socket is up; 202 while the command runs: ask again.
        if reply.status in (202, 503) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)
            continue
        raise RuntimeError(f"{command['name']} answered {reply.status}: {reply.body[:300]!r}")


def _controls(playwright_text: str) -> int:
    return sum(1 for role in PLAYWRIGHT_CONTROL.findall(playwright_text) if role in CONTROL_ROLES)


async def run(quick: bool, data_root: Path, log: Callable[[str], None]) -> dict[str, Any]:
    skipped: dict[str, str] = {}
    sets: list[PageSet] = []
    for page_set in PAGE_SETS:
        why = await asyncio.to_thread(_ensure_package, page_set, log)
        if why is None:
            sets.append(page_set)
        else:
            skipped[page_set.package] = why
            log(f"snapshot: skipping {page_set.package}: {why}")
    result: dict[str, Any] = {
        "method": __doc__,
        "chars_per_token": CHARS_PER_TOKEN,
        "target_ratio": TARGET_RATIO,
        "skipped": skipped,
        "pages": [],
    }
    if not sets:
        return result
    pages: list[tuple[PageSet, str]] = [
        (s, p) for s in sets for p in (s.quick if quick else s.full)
    ]
    data_dir = data_root / "snapshot"
    async with (
        chromium_rig(data_dir, log, lambda: DocPages(sets)) as rig,
        plain_chromium(rig.profile_root / "playwright") as plain,
        async_playwright() as playwright,
    ):
        browser = await playwright.chromium.connect_over_cdp(plain.devtools.base)
        connection = rig.server.connection()
        try:
            context = browser.contexts[0] if browser.contexts else await browser.new_context()
            tab = await context.new_page()
            session_id, _ = await rig.create_session(connection)
            for page_set, page in pages:
                url = f"{rig.page.origin}{page_set.prefix}/{page}"
                await _command(connection, session_id, {"name": "navigate", "url": url})
                ours = await _command(
                    connection,
                    session_id,
                    {"name": "snapshot", "format": "compact", "maxNodes": MAX_NODES},
                )
                await tab.goto(url)
                theirs = await tab.aria_snapshot(mode="ai")
                text: str = ours["text"]
                row = {
                    "package": page_set.package,
                    "page": page,
                    "understudy_chars": len(text),
                    "playwright_chars": len(theirs),
                    "ratio": len(text) / len(theirs),
                    "understudy_lines": len(text.splitlines()),
                    "understudy_truncated": ours["truncated"],
                    "understudy_refs": len(set(UNDERSTUDY_REF.findall(text))),
                    "playwright_controls": _controls(theirs),
                }
                result["pages"].append(row)
                log(
                    f"snapshot: {page}: {row['understudy_chars']:,} vs "
                    f"{row['playwright_chars']:,} chars, ratio {row['ratio']:.2f}"
                )
            await rig.end_session(connection, session_id)
            result["browser_version"] = browser.version
        finally:
            await connection.close()
            await browser.close()
    result["playwright_version"] = metadata.version("playwright")
    ours_total = sum(p["understudy_chars"] for p in result["pages"])
    theirs_total = sum(p["playwright_chars"] for p in result["pages"])
    result["total"] = {
        "understudy_chars": ours_total,
        "playwright_chars": theirs_total,
        "ratio": ours_total / theirs_total,
    }
    return result


async def suite(ctx: Context) -> dict[str, Any]:
    """One page per package (quick), five per package otherwise."""
    return await run(ctx.quick, ctx.data_root, ctx.log)


def _tokens(chars: int) -> str:
    return f"~{fmt(chars / CHARS_PER_TOKEN, 0)}"


def tables(result: dict[str, Any]) -> list[Table]:
    table = Table(
        "Snapshot size for a model's context: Understudy compact vs Playwright aria_snapshot(ai)",
        [
            "page",
            "understudy chars",
            "~tokens",
            "playwright chars",
            "~tokens",
            "ratio",
            "<= 0.5",
            "refs (ours)",
            "controls (pw)",
        ],
    )
    for page in result["pages"]:
        table.rows.append(
            [
                f"{page['package']}: {page['page']}",
                fmt(page["understudy_chars"], 0),
                _tokens(page["understudy_chars"]),
                fmt(page["playwright_chars"], 0),
                _tokens(page["playwright_chars"]),
                fmt(page["ratio"]),
                "yes" if page["ratio"] <= TARGET_RATIO else "NO",
                str(page["understudy_refs"]),
                str(page["playwright_controls"]),
            ]
        )
    if "total" in result:
        total = result["total"]
        table.rows.append(
            [
                "all pages",
                fmt(total["understudy_chars"], 0),
                _tokens(total["understudy_chars"]),
                fmt(total["playwright_chars"], 0),
                _tokens(total["playwright_chars"]),
                fmt(total["ratio"]),
                "yes" if total["ratio"] <= TARGET_RATIO else "NO",
                "",
                "",
            ]
        )
    table.notes.append(
        f"~tokens = characters / {CHARS_PER_TOKEN}, an approximation (no tokenizer was run); "
        "ratio = Understudy chars / Playwright chars"
    )
    table.notes.append(
        "refs (ours): distinct refs in the compact text (controls and graphics); controls (pw): "
        "lines of a control role with a ref in Playwright's snapshot"
    )
    if any(page["understudy_truncated"] for page in result["pages"]):
        table.notes.append(f"a compact snapshot hit maxNodes {MAX_NODES}: see the JSON")
    if "browser_version" in result:
        table.notes.append(
            f"{result['browser_version']}, Playwright {result['playwright_version']}"
        )
    for package, why in result["skipped"].items():
        table.notes.append(f"skipped {package}: {why}")
    return [table]


def targets(result: dict[str, Any]) -> list[Target]:
    pages = result["pages"]
    if not pages:
        return [
            Target(
                "compact snapshot vs Playwright's ai snapshot, characters per page",
                f"<= {TARGET_RATIO}",
                "no page available (see the skipped notes)",
                None,
            )
        ]
    worst = max(pages, key=lambda p: p["ratio"])
    return [
        Target(
            "compact snapshot vs Playwright's ai snapshot, characters per page",
            f"<= {TARGET_RATIO} on every page",
            f"worst {fmt(worst['ratio'])} ({worst['page']}), all pages "
            f"{fmt(result['total']['ratio'])} over {len(pages)} pages",
            all(p["ratio"] <= TARGET_RATIO for p in pages),
        )
    ]
