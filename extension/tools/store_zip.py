"""Package `extension/dist` for the Chrome Web Store: `make extension-store`.

The store assigns the extension its own id and refuses a manifest that carries a `key`, and a
listing has no use for source maps (they would also publish the sources' paths), so the store zip
is `extension/dist` without the manifest's `key`, without `*.map` files and without the
`sourceMappingURL` comments that point at them. Entries are sorted and dated 1980-01-01, so the
same build always gives the same bytes. The icons the manifest names must be in the build.
"""

from __future__ import annotations

import json
import re
import sys
import zipfile
from pathlib import Path

EXTENSION = Path(__file__).resolve().parent.parent
DIST = EXTENSION / "dist"
STORE_ZIP = EXTENSION / "understudy-extension-store.zip"
_SOURCE_MAP_COMMENT = re.compile(rb"\n?//# sourceMappingURL=\S+\s*$")


class StoreBuildError(Exception):
    """The build cannot be published as it is (what is missing is in the message)."""


def store_manifest(manifest: dict[str, object]) -> dict[str, object]:
    """The manifest as the store takes it: the same, without `key`."""
    return {name: value for name, value in manifest.items() if name != "key"}


def icon_files(manifest: dict[str, object]) -> set[str]:
    """Every file the manifest's `icons` and `action.default_icon` name."""
    action = manifest.get("action")
    holders = [
        manifest.get("icons"),
        action.get("default_icon") if isinstance(action, dict) else None,
    ]
    return {str(path) for holder in holders if isinstance(holder, dict) for path in holder.values()}


def build(dist: Path = DIST, target: Path = STORE_ZIP) -> Path:
    """Write the store zip of `dist` to `target` and return it."""
    manifest_path = dist / "manifest.json"
    if not manifest_path.exists():
        raise StoreBuildError(f"{manifest_path} is missing: run `make extension` first")
    manifest = store_manifest(json.loads(manifest_path.read_text()))
    files = sorted(
        p for p in dist.rglob("*") if p.is_file() and p.suffix != ".map" and p != manifest_path
    )
    names = {p.relative_to(dist).as_posix() for p in files}
    missing = sorted(icon_files(manifest) - names)
    if missing:
        raise StoreBuildError(f"the manifest names icons the build lacks: {', '.join(missing)}")
    entries = {"manifest.json": (json.dumps(manifest, indent=2) + "\n").encode()}
    for path in files:
        data = path.read_bytes()
        if path.suffix in (".js", ".css"):
            data = _SOURCE_MAP_COMMENT.sub(b"\n", data)
        entries[path.relative_to(dist).as_posix()] = data
    tmp = target.with_suffix(".zip.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(entries):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, entries[name])
    tmp.replace(target)
    return target


def main() -> int:
    try:
        written = build()
    except StoreBuildError as error:
        print(f"extension-store: {error}", file=sys.stderr)
        return 1
    print(f"wrote {written.relative_to(EXTENSION.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
