"""`make extension-store`: a zip the Chrome Web Store takes, with its permissions justified."""

from __future__ import annotations

import importlib.util
import json
import re
import struct
import subprocess
import sys
import zipfile
from typing import TYPE_CHECKING

import pytest

from demo.build import EXTENSION, ROOT, build_extension

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.slow  # builds the extension with esbuild

STORE_MD = EXTENSION / "STORE.md"
SIZES = (16, 48, 128)


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.fixture(scope="module")
def store_zip(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    build_extension()
    target = tmp_path_factory.mktemp("store") / "store.zip"
    code = (
        "import sys; from pathlib import Path; sys.path.insert(0, 'extension/tools'); "
        f"import store_zip; store_zip.build(target=Path({str(target)!r}))"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
    return zipfile.ZipFile(target)


def test_the_store_zip_has_no_key_and_no_source_maps(store_zip: zipfile.ZipFile) -> None:
    names = store_zip.namelist()
    manifest = json.loads(store_zip.read("manifest.json"))
    assert "key" not in manifest
    assert json.loads((EXTENSION / "dist" / "manifest.json").read_text())["key"]  # dist keeps it
    assert [n for n in names if n.endswith(".map")] == []
    assert any(n.endswith(".map") for n in (p.name for p in (EXTENSION / "dist").iterdir()))
    for name in (n for n in names if n.endswith((".js", ".css"))):
        assert b"sourceMappingURL" not in store_zip.read(name), name
    assert {"background.js", "options.html", "popup.html", "managed_schema.json"} <= set(names)
    # Everything else of the manifest is as built.
    built = json.loads((EXTENSION / "dist" / "manifest.json").read_text())
    assert manifest == {k: v for k, v in built.items() if k != "key"}


def test_the_icons_exist_at_16_48_and_128_pixels(store_zip: zipfile.ZipFile) -> None:
    manifest = json.loads(store_zip.read("manifest.json"))
    for holder in (manifest["icons"], manifest["action"]["default_icon"]):
        assert sorted(int(size) for size in holder) == list(SIZES)
        for size, name in holder.items():
            assert png_size(store_zip.read(name)) == (int(size), int(size)), name


def test_the_committed_icons_are_what_the_drawing_script_draws(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        "draw_icons", EXTENSION / "tools" / "draw_icons.py"
    )
    assert spec and spec.loader
    draw_icons = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(draw_icons)
    for size in SIZES:
        assert (EXTENSION / "static" / f"icon-{size}.png").read_bytes() == draw_icons.png(size)


def test_every_permission_the_manifest_declares_is_justified_in_store_md() -> None:
    manifest = json.loads((EXTENSION / "manifest.json").read_text())
    text = STORE_MD.read_text()
    rows = {
        entry.strip("` ")
        for cell in re.findall(r"^\| ([^|]+) \|", text, re.MULTILINE)
        for entry in cell.split(",")
    }
    declared = [
        *manifest["permissions"],
        *manifest.get("host_permissions", []),
        *manifest.get("optional_host_permissions", []),
    ]
    assert declared
    assert [p for p in declared if p not in rows] == []
    # and nothing is justified that the manifest does not ask for
    listed = {r for r in rows if r not in ("Permission", "Host permission", "---")}
    assert listed == set(declared)
    assert "## Privacy statement" in text
    for promise in ("sold", "content-free", "third party"):
        assert promise in text, promise


def test_the_store_zip_is_the_same_bytes_on_every_build(tmp_path: Path) -> None:
    build_extension()
    outputs = []
    for name in ("a.zip", "b.zip"):
        code = (
            "import sys; from pathlib import Path; sys.path.insert(0, 'extension/tools'); "
            f"import store_zip; store_zip.build(target=Path({str(tmp_path / name)!r}))"
        )
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
        outputs.append((tmp_path / name).read_bytes())
    assert outputs[0] == outputs[1]
