"""The TypeScript side of the spec: examples type-check, and unhandled frames break the build."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from codegen._bundle import ROOT, Spec, load
from codegen._outputs import HEADER, TS_DIR, TS_PACKAGE, _json2ts

WIRE = ROOT / TS_DIR / "wire.ts"
TSC = ROOT / TS_PACKAGE / "node_modules" / ".bin" / "tsc"
FIXTURES = Path(__file__).parent / "fixtures"
EXTENSION = ROOT / "extension"

pytestmark = pytest.mark.skipif(not TSC.exists(), reason="run scripts/bootstrap: no tsc")


def _tsc(folder: Path) -> subprocess.CompletedProcess[str]:
    files = sorted(str(p) for p in folder.glob("*.ts"))
    return subprocess.run(
        [
            str(TSC),
            "--noEmit",
            "--strict",
            "--noImplicitReturns",
            "--target",
            "ES2022",
            "--module",
            "ESNext",
            "--moduleResolution",
            "Bundler",
            "--skipLibCheck",
            *files,
        ],
        capture_output=True,
        text=True,
        cwd=folder,
    )


def test_every_example_type_checks_against_the_generated_types(tmp_path: Path) -> None:
    spec = load()
    shutil.copy(WIRE, tmp_path / "wire.ts")
    wire = (tmp_path / "wire.ts").read_text()
    names = [
        n for n in spec.defs if f"export type {n} " in wire or f"export interface {n} " in wire
    ]
    assert len(names) == len(spec.defs), set(spec.defs) - set(names)
    lines = [f"import type {{ {', '.join(names)} }} from './wire';"]
    for name in names:
        for i, example in enumerate(spec.defs[name]["examples"]):
            lines.append(f"export const {name}_{i}: {name} = {json.dumps(example)};")
    (tmp_path / "examples.ts").write_text("\n".join(lines) + "\n")
    result = _tsc(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_wrong_example_does_not_type_check(tmp_path: Path) -> None:
    # Guards the test above: the compiler really checks these shapes.
    shutil.copy(WIRE, tmp_path / "wire.ts")
    (tmp_path / "bad.ts").write_text(
        "import type { ClickCommand } from './wire';\n"
        "export const c: ClickCommand = { name: 'click', ref: 'g1e1', extra: true };\n"
    )
    result = _tsc(tmp_path)
    assert result.returncode != 0
    assert "extra" in result.stdout


def _with_extra_device_frame(spec: Spec) -> dict[str, object]:
    bundle = copy.deepcopy(spec.bundle)
    defs = bundle["$defs"]
    defs["DeviceClientTelemetry"] = {
        "title": "DeviceClientTelemetry",
        "type": "object",
        "additionalProperties": False,
        "required": ["type"],
        "properties": {"type": {"type": "string", "const": "telemetry"}},
    }
    union = defs["DeviceClientFrame"]
    union["oneOf"].append({"$ref": "#/$defs/DeviceClientTelemetry"})
    union["discriminator"]["mapping"]["telemetry"] = "#/$defs/DeviceClientTelemetry"
    return bundle


def test_the_handler_fixture_handles_every_generated_device_frame(tmp_path: Path) -> None:
    shutil.copy(WIRE, tmp_path / "wire.ts")
    shutil.copy(FIXTURES / "frame_handler.ts", tmp_path / "frame_handler.ts")
    result = _tsc(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_adding_a_frame_to_the_spec_breaks_an_exhaustive_handler(tmp_path: Path) -> None:
    spec = load()
    changed = Spec(
        openapi=spec.openapi,
        frame_files=spec.frame_files,
        defs=spec.defs,
        origin=spec.origin,
        bundle=_with_extra_device_frame(spec),
    )
    (tmp_path / "wire.ts").write_text(f"// {HEADER}\n\n" + _json2ts(changed))
    assert '"telemetry"' in (tmp_path / "wire.ts").read_text()
    shutil.copy(FIXTURES / "frame_handler.ts", tmp_path / "frame_handler.ts")
    result = _tsc(tmp_path)
    assert result.returncode != 0
    assert "DeviceClientTelemetry" in result.stdout
    assert "not assignable to type 'never'" in result.stdout


def _decoder_tree(tmp_path: Path, spec: Spec) -> Path:
    """wire.ts and frames.ts rendered from `spec`, beside the extension's own handled.ts."""
    from codegen._protocol import render_ts_frames

    (tmp_path / "generated").mkdir()
    (tmp_path / "protocol").mkdir()
    (tmp_path / "generated" / "wire.ts").write_text(f"// {HEADER}\n\n" + _json2ts(spec))
    (tmp_path / "generated" / "frames.ts").write_text(render_ts_frames(spec, HEADER))
    # handled.ts imports the package; here the package is the two files just rendered.
    (tmp_path / "generated" / "index.ts").write_text(
        'export type * from "./wire.js";\nexport * from "./frames.js";\n'
    )
    handled = (EXTENSION / "src" / "protocol" / "handled.ts").read_text()
    (tmp_path / "protocol" / "handled.ts").write_text(
        handled.replace('"@understudy/protocol"', '"../generated/index.js"')
    )
    return tmp_path


def _tsc_tree(root: Path) -> subprocess.CompletedProcess[str]:
    files = sorted(str(p) for p in root.rglob("*.ts"))
    return subprocess.run(
        [
            str(TSC),
            "--noEmit",
            "--strict",
            "--target",
            "ES2022",
            "--module",
            "ESNext",
            "--moduleResolution",
            "Bundler",
            "--skipLibCheck",
            *files,
        ],
        capture_output=True,
        text=True,
        cwd=root,
    )


def _with_extra_grant_field(spec: Spec) -> Spec:
    bundle = copy.deepcopy(spec.bundle)
    grant = bundle["$defs"]["SessionServerWriteGrant"]
    grant["properties"]["timeoutMs"] = {"type": "integer", "minimum": 1}
    return Spec(
        openapi=spec.openapi,
        frame_files=spec.frame_files,
        defs=bundle["$defs"],
        origin=spec.origin,
        bundle=bundle,
    )


def test_the_decoder_tables_and_handled_fields_compile_as_generated(tmp_path: Path) -> None:
    result = _tsc_tree(_decoder_tree(tmp_path, load()))
    assert result.returncode == 0, result.stdout + result.stderr


def test_adding_a_field_to_a_frame_breaks_the_build_until_it_is_handled(tmp_path: Path) -> None:
    root = _decoder_tree(tmp_path, _with_extra_grant_field(load()))
    # The decoder's generated table has the field (no runtime "unknown field")...
    assert (
        'optional: { secretValue: "string", timeoutMs: "integer" }'
        in (root / "generated" / "frames.ts").read_text()
    )
    result = _tsc_tree(root)
    # ... and the extension does not compile until handled.ts lists it.
    assert result.returncode != 0
    assert "write_grant.timeoutMs" in result.stdout
    assert "protocol/handled.ts" in result.stdout


def test_a_field_table_that_misses_a_schema_field_does_not_compile(tmp_path: Path) -> None:
    root = _decoder_tree(tmp_path, load())
    frames = root / "generated" / "frames.ts"
    stale = frames.read_text().replace(', secretValue: "string"', "", 1)
    stale = stale.replace('optional: { secretValue: "string" }', "optional: {}", 1)
    assert stale != frames.read_text()
    frames.write_text(stale)
    result = _tsc_tree(root)
    assert result.returncode != 0
    assert "secretValue" in result.stdout
