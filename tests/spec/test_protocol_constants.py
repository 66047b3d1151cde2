"""Protocol constants: the generated Python and TypeScript say what the spec says, codegen refuses a
malformed or contradicted entry, and the code uses the generated names instead of copies."""

from __future__ import annotations

import copy
import io
import json
import re
import tokenize
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from codegen._bundle import FRAMES, ROOT, Spec, SpecError, load
from codegen._checks import check_meaning
from codegen._protocol import CONSTANTS_FILE, CONSTANTS_KEY, check_constants
from understudy import _connection
from understudy._config import ConnectionLimits
from understudy.generated import protocol

if TYPE_CHECKING:
    from pathlib import Path

SPEC_FILE = FRAMES / CONSTANTS_FILE
TS_FILE = ROOT / "packages" / "protocol" / "src" / "generated" / "protocol.ts"


def _spec_values() -> dict[str, dict[str, Any]]:
    """The constants read straight from the spec file, not through codegen."""
    groups = json.loads(SPEC_FILE.read_text())[CONSTANTS_KEY]
    return {name: entry for group in groups.values() for name, entry in group["constants"].items()}


def test_the_spec_declares_the_close_codes_and_limits_both_sides_use() -> None:
    values = {name: entry["value"] for name, entry in _spec_values().items()}
    assert values["CLOSE_TICKET_REFUSED"] == 4401
    assert values["CLOSE_NOT_AUTHORITATIVE"] == 4403
    assert values["CLOSE_HELLO_TIMEOUT"] == 4408
    assert values["CLOSE_REVOKED"] == 4410
    assert values["CLOSE_FRAME_RATE"] == 4429
    assert values["DIALOG_OUTBOX_MAX_RECORDS"] == 256
    assert values["DIALOG_OUTBOX_MAX_BYTES"] == 256 * 1024
    assert values["DEVICE_TAB_CAPACITY"] == 2
    assert values["HEARTBEAT_INTERVAL_MS"] == 22_000
    assert values["MAX_FRAME_BYTES"] == values["MAX_SCREENSHOT_CHARS"] + 1024 * 1024


def test_generated_python_has_every_constant_with_the_spec_value() -> None:
    for name, entry in _spec_values().items():
        assert getattr(protocol, name) == entry["value"], name
        if entry["unit"] == "ms":
            assert getattr(protocol, name.removesuffix("_MS") + "_S") == entry["value"] / 1000
    sent = json.loads(SPEC_FILE.read_text())[CONSTANTS_KEY]["closeCodes"]["constants"]
    assert protocol.CLOSE_CODES == {name: entry["value"] for name, entry in sent.items()}


def test_generated_typescript_has_every_constant_with_the_spec_value() -> None:
    exported = {
        name: int(value.replace("_", ""))
        for name, value in re.findall(
            r"^export const (\w+) = ([\d_]+);$", TS_FILE.read_text(), re.M
        )
    }
    assert exported == {name: entry["value"] for name, entry in _spec_values().items()}


def _with_constant(spec: Spec, group: str, name: str, entry: Any) -> Spec:
    files = copy.deepcopy(spec.frame_files)
    constants = files[CONSTANTS_FILE][CONSTANTS_KEY][group]["constants"]
    if entry is None:
        del constants[name]
    else:
        constants[name] = entry
    return replace(spec, frame_files=files)


@pytest.mark.parametrize(
    ("group", "name", "entry", "message"),
    [
        ("intervals", "POLL_INTERVAL", {"value": 5, "unit": "ms", "description": "d"}, "…_MS"),
        ("closeCodes", "GONE", {"value": 4404, "unit": "code", "description": "d"}, "CLOSE_"),
        ("limits", "MAX_TABS", {"value": 2.5, "unit": "count", "description": "d"}, "integer"),
        ("limits", "MAX_TABS", {"value": 2, "unit": "tabs", "description": "d"}, "`unit`"),
        ("limits", "MAX_TABS", {"value": 2, "unit": "count", "description": ""}, "description"),
        ("limits", "max_tabs", {"value": 2, "unit": "count", "description": "d"}, "UPPER_SNAKE"),
        ("limits", "MAX_TABS", {"value": 2, "unit": "count"}, "exactly"),
        ("limits", "CLOSE_REVOKED", {"value": 1, "unit": "count", "description": "d"}, "twice"),
    ],
)
def test_codegen_refuses_a_malformed_constant_naming_it(
    group: str, name: str, entry: Any, message: str
) -> None:
    with pytest.raises(SpecError, match=re.escape(message)) as caught:
        check_constants(_with_constant(load(), group, name, entry))
    assert name in str(caught.value) or "CLOSE_REVOKED" in str(caught.value)


@pytest.mark.parametrize(
    ("name", "value", "where"),
    [
        ("HEARTBEAT_INTERVAL_MS", 30_000, "heartbeatIntervalMs const"),
        ("MAX_SCREENSHOT_CHARS", 1_000, "data maxLength"),
        ("WRITE_JOURNAL_MAX_ENTRIES", 10, "journal maxItems"),
    ],
)
def test_codegen_refuses_a_constant_the_frame_schemas_contradict(
    name: str, value: int, where: str
) -> None:
    spec = load()
    groups = spec.frame_files[CONSTANTS_FILE][CONSTANTS_KEY]
    group = next(g for g, body in groups.items() if name in body["constants"])
    entry = {**groups[group]["constants"][name], "value": value}
    with pytest.raises(SpecError, match=f"{where} is .*{name} = {value}"):
        check_meaning(_with_constant(spec, group, name, entry))


def test_the_backend_closes_with_the_generated_codes() -> None:
    for name, code in protocol.CLOSE_CODES.items():
        assert getattr(_connection, name) is getattr(protocol, name) == code


def test_the_backend_defaults_are_the_spec_defaults() -> None:
    limits = ConnectionLimits()
    assert limits.hello_timeout_s == protocol.HELLO_TIMEOUT_S
    assert limits.max_frame_bytes == protocol.MAX_FRAME_BYTES


# Values distinctive enough that a number equal to one in code is a copy of it (small counts such
# as 2 and round seconds are not searchable this way; the units `code`, `bytes` and `chars` are).
DISTINCTIVE = {
    entry["value"]: name
    for name, entry in _spec_values().items()
    if entry["unit"] in {"code", "bytes", "chars"} or name == "HEARTBEAT_INTERVAL_MS"
}
# Copies in modules that are being restructured elsewhere; each is to become the generated name.
KNOWN_COPIES: set[tuple[str, str]] = set()


def _python_numbers(path: Path) -> list[int]:
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    return [
        int(tok.string.replace("_", ""), 0)
        for tok in tokens
        if tok.type == tokenize.NUMBER and re.fullmatch(r"[\d_]+", tok.string)
    ]


def _typescript_numbers(path: Path) -> list[int]:
    text = re.sub(r"/\*.*?\*/", "", path.read_text(), flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"(['\"`])(?:\\.|(?!\1).)*\1", '""', text)  # strings: messages, not numbers
    return [int(n.replace("_", "")) for n in re.findall(r"(?<![\w.])\d[\d_]*(?![\w.])", text)]


def _copies() -> set[tuple[str, str]]:
    found = set()
    sources = [
        *((p, _python_numbers) for p in (ROOT / "backend" / "src").rglob("*.py")),
        *((p, _python_numbers) for p in (ROOT / "connector" / "src").rglob("*.py")),
        *((p, _typescript_numbers) for p in (ROOT / "extension" / "src").rglob("*.ts")),
    ]
    for path, numbers in sources:
        rel = path.relative_to(ROOT).as_posix()
        if "/generated/" in rel:
            continue
        found |= {(rel, DISTINCTIVE[n]) for n in numbers(path) if n in DISTINCTIVE}
    return found


def test_no_code_keeps_its_own_copy_of_a_protocol_constant() -> None:
    assert _copies() <= KNOWN_COPIES


def test_the_copy_scan_sees_a_copy(tmp_path: Path) -> None:
    # Guards the test above: both scanners find a literal close code, and skip prose.
    (tmp_path / "a.py").write_text('"""Closes with 4410."""\nCODE = 4_410  # 4403\n')
    (tmp_path / "a.ts").write_text('// 4401\nconst A = 4403; /* 4408 */ const m = "4429";\n')
    assert _python_numbers(tmp_path / "a.py") == [4410]
    assert _typescript_numbers(tmp_path / "a.ts") == [4403]
