"""What the repository's main jobs (`make run`, `make study`) share: the built extension, a port."""

from __future__ import annotations

import shutil
import socket
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTENSION = ROOT / "extension"
DIST = EXTENSION / "dist"


def build_extension() -> str:
    """Build `extension/dist` unless it is newer than every source; says which it did."""
    sources = [p for d in ("src", "static") for p in (EXTENSION / d).rglob("*") if p.is_file()]
    sources += [EXTENSION / "manifest.json", EXTENSION / "build.mjs"]
    built = DIST / "background.js"
    if built.exists() and built.stat().st_mtime >= max(p.stat().st_mtime for p in sources):
        return "up to date"
    pnpm = shutil.which("pnpm")
    command = [pnpm] if pnpm else ["npx", "--yes", "pnpm@12.4.2"]
    done = subprocess.run(
        [*command, "-C", str(EXTENSION), "build"], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"the extension did not build:\n{done.stdout}{done.stderr}")
    return "built extension/dist"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
