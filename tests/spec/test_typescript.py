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
