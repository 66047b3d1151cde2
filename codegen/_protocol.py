"""What both ends of the sockets check and count with, rendered from the spec.

- Protocol constants (`spec/frames/protocol-constants.json`, keyword `x-understudy-constants`):
  close codes, limits, intervals; written as `understudy.generated.protocol` and
  `packages/protocol/src/generated/protocol.ts`.
- The frame decoder's tables (`packages/protocol/src/generated/frames.ts`): for each frame the
  backend sends and each command, the fields it has, required or optional, and the kind of value
  each holds. The tables are typed against the generated unions of `wire.ts`, so the compiler
  refuses a table that misses a field of the schema or names one it does not have.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codegen._bundle import Spec, SpecError, resolve

TEMPLATES = Path(__file__).parent / "templates"

Json = dict[str, Any]

CONSTANTS_FILE = "protocol-constants.json"
CONSTANTS_KEY = "x-understudy-constants"
_WHERE = f"frames/{CONSTANTS_FILE}"
# unit -> the suffix a constant of that unit ends with ("" for none)
UNITS = {"code": "CLOSE_", "count": "", "bytes": "_BYTES", "chars": "_CHARS", "ms": "_MS"}
SERVER_CLOSES = "closeCodes"  # the group of close codes the backend sends
_NAME = re.compile(r"^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$")

# union name -> discriminant property: what the extension decodes from the backend.
DECODED_UNIONS = {
    "DeviceServerFrame": "type",
    "SessionServerFrame": "type",
    "Command": "name",
}
# bundled names whose values the decoder checks against the snapshot ref pattern
_REF_DEFS = {"Ref"}
_TABLE_NAMES = {
    "DeviceServerFrame": "DEVICE_SERVER_FIELDS",
    "SessionServerFrame": "SESSION_SERVER_FIELDS",
    "Command": "COMMAND_FIELDS",
}


@dataclass(frozen=True)
class Constant:
    name: str
    value: int
    unit: str
    description: str


@dataclass(frozen=True)
class Group:
    key: str
    title: str
    description: str
    constants: tuple[Constant, ...]


def constant_groups(spec: Spec) -> list[Group]:
    """The constants of the spec, by group, in spec order; `SpecError` on a malformed entry."""
    doc = spec.frame_files.get(CONSTANTS_FILE)
    if doc is None or not isinstance(doc.get(CONSTANTS_KEY), dict):
        raise SpecError(f"{_WHERE}: missing, or without an object `{CONSTANTS_KEY}`")
    groups, seen = [], set()
    for key, group in doc[CONSTANTS_KEY].items():
        where = f"{_WHERE}#/{CONSTANTS_KEY}/{key}"
        if not isinstance(group, dict) or not isinstance(group.get("constants"), dict):
            raise SpecError(f"{where}: a group needs `title`, `description` and `constants`")
        for field in ("title", "description"):
            if not isinstance(group.get(field), str) or not group[field]:
                raise SpecError(f"{where}: `{field}` must be a non-empty string")
        constants = []
        for name, entry in group["constants"].items():
            constants.append(_constant(f"{where}/constants/{name}", name, entry))
            if name in seen:
                raise SpecError(f"{where}/constants/{name}: defined twice")
            seen.add(name)
        groups.append(Group(key, group["title"], group["description"], tuple(constants)))
    return groups


def _constant(where: str, name: str, entry: Any) -> Constant:
    if not _NAME.match(name):
        raise SpecError(f"{where}: a constant's name is UPPER_SNAKE_CASE")
    if not isinstance(entry, dict) or set(entry) != {"value", "unit", "description"}:
        raise SpecError(f"{where}: an entry has exactly `value`, `unit` and `description`")
    value, unit, description = entry["value"], entry["unit"], entry["description"]
    if type(value) is not int or value <= 0:
        raise SpecError(f"{where}: `value` must be a positive integer, not {value!r}")
    if unit not in UNITS:
        raise SpecError(f"{where}: `unit` must be one of {sorted(UNITS)}, not {unit!r}")
    affix = UNITS[unit]
    named = name.startswith(affix) if unit == "code" else name.endswith(affix)
    if affix and not named:
        raise SpecError(f"{where}: a constant in {unit!r} is named …{affix} (the unit in the name)")
    if not isinstance(description, str) or not description:
        raise SpecError(f"{where}: `description` must be a non-empty string")
    return Constant(name, value, unit, description)


def constants(spec: Spec) -> dict[str, int]:
    """Every constant by name."""
    return {c.name: c.value for g in constant_groups(spec) for c in g.constants}


def check_constants(spec: Spec) -> None:
    """The constants are well formed and agree with the schemas that state the same number."""
    values = constants(spec)
    agreements = [
        ("DeviceServerWelcome", ("heartbeatIntervalMs",), "const", "HEARTBEAT_INTERVAL_MS"),
        ("ScreenshotResult", ("data",), "maxLength", "MAX_SCREENSHOT_CHARS"),
        ("SessionClientHello", ("journal",), "maxItems", "WRITE_JOURNAL_MAX_ENTRIES"),
    ]
    for name, path, keyword, constant in agreements:
        schema = spec.defs.get(name, {})
        for prop in path:
            schema = resolve(spec, schema.get("properties", {}).get(prop, {}))
        if constant not in values:
            raise SpecError(f"{_WHERE}: {constant} is missing ({name} states it)")
        if schema.get(keyword) != values[constant]:
            raise SpecError(
                f"{spec.origin.get(name, name)}: {'.'.join(path)} {keyword} is "
                f"{schema.get(keyword)!r}, but {_WHERE} says {constant} = {values[constant]}"
            )
    decoder_tables(spec)  # building the tables is the check: every decoded field has a kind


def render_python(spec: Spec, header: str) -> str:
    """`understudy.generated.protocol`: each constant, and each `ms` one in seconds too."""
    lines = [
        f"# {header}",
        '"""Protocol constants both ends of the sockets share.',
        "",
        "From spec/frames/protocol-constants.json.",
        "Each value in milliseconds is also given in seconds (`…_S`), for the backend's clock.",
        '"""',
        "",
        "from typing import Final",
    ]
    for group in constant_groups(spec):
        lines += ["", f"# {group.title}"]
        for c in group.constants:
            lines.append(f"{c.name}: Final = {_py_int(c.value)}")
            lines.append(f'"""{_sentence(c.description)}"""')
            if c.unit == "ms":
                seconds = c.name.removesuffix("_MS") + "_S"
                lines.append(f"{seconds}: Final = {c.value / 1000!r}")
                lines.append(f'"""`{c.name}` in seconds."""')
    closes = [c.name for g in constant_groups(spec) if g.key == SERVER_CLOSES for c in g.constants]
    lines += [
        "",
        "# Every close code the backend sends, by name.",
        "CLOSE_CODES: Final[dict[str, int]] = {"
        + ", ".join(f"{json.dumps(n)}: {n}" for n in closes)
        + "}",
        "",
    ]
    return "\n".join(lines)


def render_typescript(spec: Spec, header: str) -> str:
    """`packages/protocol/src/generated/protocol.ts`: each constant with its description."""
    out = [f"// {header}", "", "/** Protocol constants (spec/frames/protocol-constants.json). */"]
    closes = []
    for group in constant_groups(spec):
        out += ["", f"// {group.title}"]
        for c in group.constants:
            out.append(f"/** {_sentence(c.description)} */")
            out.append(f"export const {c.name} = {_ts_int(c.value)};")
            if group.key == SERVER_CLOSES:
                closes.append(c.name)
    out += [
        "",
        "/** A close code the backend sends (not one the extension closes its own socket with). */",
        "export type CloseCode = " + " | ".join(f"typeof {n}" for n in closes) + ";",
        "",
    ]
    return "\n".join(out)


def _sentence(text: str) -> str:
    return text.replace("*/", "* /").replace('"""', "'''")


def _py_int(value: int) -> str:
    return f"{value:_}" if value >= 10_000 else str(value)


def _ts_int(value: int) -> str:
    return f"{value:_}" if value >= 10_000 else str(value)


# --- decoder tables --------------------------------------------------------------------------


def decoder_tables(spec: Spec) -> dict[str, dict[str, tuple[dict[str, str], dict[str, str]]]]:
    """union -> discriminant value -> (required fields, optional fields), each field -> kind."""
    tables = {}
    for union, key in DECODED_UNIONS.items():
        schema = spec.defs[union]
        mapping = schema.get("discriminator", {}).get("mapping", {})
        if schema.get("discriminator", {}).get("propertyName") != key or not mapping:
            raise SpecError(f"{spec.origin[union]}: the decoder needs a discriminator on {key!r}")
        table = {}
        for tag, ref in mapping.items():
            name = ref.removeprefix("#/$defs/")
            branch = spec.defs[name]
            where = spec.origin[name]
            required = [f for f in branch.get("required", []) if f != key]
            props = {f: s for f, s in branch.get("properties", {}).items() if f != key}
            missing = [f for f in required if f not in props]
            if missing:
                raise SpecError(f"{where}: required {missing} are not properties")
            req = {f: _kind(spec, props[f], f"{where}/properties/{f}") for f in required}
            opt = {
                f: _kind(spec, s, f"{where}/properties/{f}")
                for f, s in props.items()
                if f not in required
            }
            table[tag] = (req, opt)
        tables[union] = table
    return tables


def _kind(spec: Spec, schema: Json, where: str) -> str:
    """The decoder's kind of value for a property schema."""
    seen = schema
    while "$ref" in seen:
        name = seen["$ref"].removeprefix("#/$defs/")
        if name in _REF_DEFS:
            return "ref"
        seen = spec.defs[name]
    branches = seen.get("oneOf") or seen.get("anyOf")
    if branches:
        kinds = {_kind(spec, b, where) for b in branches}
        if len(kinds) == 1:
            return kinds.pop()
        raise SpecError(f"{where}: branches of kinds {sorted(kinds)}; the decoder checks one kind")
    kind = seen.get("type")
    if kind in {"string", "integer", "boolean", "array", "object"}:
        return str(kind)
    if "const" in seen and isinstance(seen["const"], str):
        return "string"
    raise SpecError(f"{where}: no decoder kind for {json.dumps(seen)[:80]}")


def render_ts_frames(spec: Spec, header: str) -> str:
    """`packages/protocol/src/generated/frames.ts`: the decoder's tables, typed against wire.ts."""
    tables = decoder_tables(spec)
    imports = f'import type {{ {", ".join(sorted(tables))} }} from "./wire.js";'
    template = (TEMPLATES / "frames.ts").read_text().replace("__IMPORTS__", imports)
    out = [f"// {header}", "", template.rstrip("\n")]
    for union, table in tables.items():
        key = DECODED_UNIONS[union]
        out += ["", f"/** Fields of each `{union}`, by `{key}`. */"]
        out.append(f"export const {_TABLE_NAMES[union]} = {{")
        for tag, (req, opt) in table.items():
            out.append(f"  {_ts_key(tag)}: {{")
            out.append(f"    required: {_ts_object(req)},")
            out.append(f"    optional: {_ts_object(opt)},")
            out.append("  },")
        out.append(f'}} as const satisfies UnionTable<{union}, "{key}">;')
    out.append("")
    return "\n".join(out)


def _ts_key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_$][A-Za-z0-9_$]*", name) else json.dumps(name)


def _ts_object(fields: dict[str, str]) -> str:
    if not fields:
        return "{}"
    return "{ " + ", ".join(f"{_ts_key(f)}: {json.dumps(k)}" for f, k in fields.items()) + " }"
