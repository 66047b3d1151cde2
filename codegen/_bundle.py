"""Load each spec of `spec/` and bundle it into one JSON Schema.

Two specs live there, each bundled on its own (they are different products and may reuse names):
- Understudy: `spec/openapi.yaml` and `spec/frames/*.json` (`load()`);
- Synthetic Users: `spec/synthetic-users/openapi.yaml` and `spec/synthetic-users/schemas/*.json`
  (`load_synthetic_users()`), whose schema files are whole schemas (a `Turn`, a `Report`) named
  by their `title`, each with `$defs` of its own.

Every named schema (the `$defs` of each schema file, a schema file's root when it is a schema, and
the `components/schemas` of the OpenAPI document) becomes one entry of the bundle's `$defs`, and
every `$ref` is rewritten to point there. A name defined twice is an error, so each name means one
thing everywhere generated code goes.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "spec"
FRAMES = SPEC / "frames"
OPENAPI = SPEC / "openapi.yaml"
ENTRY = FRAMES / "frames.json"
SU_SPEC = SPEC / "synthetic-users"
SU_OPENAPI = SU_SPEC / "openapi.yaml"
SU_SCHEMAS = SU_SPEC / "schemas"
# Keys of a schema file's root that belong to the file, not to the schema it names.
_FILE_KEYS = ("$schema", "$id", "$defs")

Json = dict[str, Any]


class SpecError(Exception):
    """The spec is wrong; the message names the file and the definition."""


@dataclass(frozen=True)
class Spec:
    openapi: Json
    frame_files: dict[str, Json]  # file name -> document, as written
    defs: dict[str, Json]  # bundled name -> schema with internal refs only
    origin: dict[str, str]  # bundled name -> "file#pointer" it came from
    bundle: Json  # a single JSON Schema document holding every definition
    openapi_file: str = "openapi.yaml"  # where `openapi` came from, relative to spec/


def load() -> Spec:
    openapi = yaml.safe_load(OPENAPI.read_text())
    frame_files = {p.name: json.loads(p.read_text()) for p in sorted(FRAMES.glob("*.json"))}
    sources: list[tuple[str, str, str, Json]] = []
    for fname, doc in frame_files.items():
        for name, schema in doc.get("$defs", {}).items():
            sources.append((f"frames/{fname}", f"/$defs/{name}", name, schema))
    for name, schema in openapi.get("components", {}).get("schemas", {}).items():
        sources.append(("openapi.yaml", f"/components/schemas/{name}", name, schema))
    defs, origin = _collect(sources)
    entry = frame_files["frames.json"]
    root_props = {
        key: _rewrite(val, "frames/frames.json", origin, where="frames/frames.json")
        for key, val in entry["properties"].items()
    }
    api_names = list(openapi.get("components", {}).get("schemas", {}))
    root_props.update({_lower_first(n): {"$ref": f"#/$defs/{n}"} for n in api_names})
    bundle: Json = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "UnderstudyWire",
        "description": "Bundle of spec/openapi.yaml and spec/frames/*.json, written by codegen.",
        "type": "object",
        "additionalProperties": False,
        "properties": root_props,
        "$defs": defs,
    }
    return Spec(openapi=openapi, frame_files=frame_files, defs=defs, origin=origin, bundle=bundle)


def load_synthetic_users() -> Spec:
    """The Synthetic Users spec: its OpenAPI document and the schema files beside it.

    `frame_files` holds the schema files (`turn.json`, `report.json`, …) by file name.
    """
    openapi_file = SU_OPENAPI.relative_to(SPEC).as_posix()
    schema_dir = SU_SCHEMAS.relative_to(SPEC).as_posix()
    openapi = yaml.safe_load(SU_OPENAPI.read_text())
    files = {p.name: json.loads(p.read_text()) for p in sorted(SU_SCHEMAS.glob("*.json"))}
    sources: list[tuple[str, str, str, Json]] = []
    for fname, doc in files.items():
        file = f"{schema_dir}/{fname}"
        if is_root_schema(doc):
            if not isinstance(doc.get("title"), str):
                raise SpecError(f"{file}: a schema file's root schema needs a `title` (its name)")
            root = {k: v for k, v in doc.items() if k not in _FILE_KEYS}
            sources.append((file, "", doc["title"], root))
        for name, schema in doc.get("$defs", {}).items():
            sources.append((file, f"/$defs/{name}", name, schema))
    for name, schema in openapi.get("components", {}).get("schemas", {}).items():
        sources.append((openapi_file, f"/components/schemas/{name}", name, schema))
    defs, origin = _collect(sources)
    bundle: Json = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "SyntheticUsersWire",
        "description": "Bundle of spec/synthetic-users/, written by codegen.",
        "type": "object",
        "additionalProperties": False,
        "properties": {_lower_first(n): {"$ref": f"#/$defs/{n}"} for n in defs},
        "$defs": defs,
    }
    return Spec(
        openapi=openapi,
        frame_files=files,
        defs=defs,
        origin=origin,
        bundle=bundle,
        openapi_file=openapi_file,
    )


def is_root_schema(doc: Json) -> bool:
    """Whether a schema file's root is itself a schema, not only a holder of `$defs`."""
    return any(key in doc for key in ("type", "oneOf", "anyOf", "allOf", "$ref"))


def _collect(sources: list[tuple[str, str, str, Json]]) -> tuple[dict[str, Json], dict[str, str]]:
    """Name every (file, pointer, name, schema) once and rewrite its refs to bundled names."""
    defs: dict[str, Json] = {}
    origin: dict[str, str] = {}
    for file, pointer, name, schema in sources:
        if name in defs:
            raise SpecError(
                f"{file}#{pointer}: the name {name!r} is already defined in {origin[name]}"
            )
        origin[name] = f"{file}#{pointer}"
        defs[name] = schema
    # Rewrite refs only once every name is known.
    for name in list(defs):
        file = origin[name].split("#", 1)[0]
        defs[name] = _rewrite(defs[name], file, origin, where=origin[name])
    return defs, origin


def _lower_first(name: str) -> str:
    return name[:1].lower() + name[1:]


def _rewrite(node: Any, file: str, origin: dict[str, str], *, where: str) -> Any:
    """Copy `node` with every `$ref` pointing at the bundle's `$defs`."""
    if isinstance(node, list):
        return [_rewrite(item, file, origin, where=where) for item in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "$ref" and isinstance(value, str):
            out[key] = _resolve_ref(value, file, origin, where=where)
        elif key in ("examples", "example", "const", "default", "enum"):
            out[key] = copy.deepcopy(value)
        else:
            out[key] = _rewrite(value, file, origin, where=where)
    return out


def _resolve_ref(ref: str, file: str, origin: dict[str, str], *, where: str) -> str:
    target_file, _, pointer = ref.partition("#")
    if target_file:
        base = Path(file).parent
        target = (base / target_file).as_posix()
        target = target.removeprefix("./")
    else:
        target = file
    wanted = f"{target}#{pointer}"
    for name, place in origin.items():
        if place == wanted:
            return f"#/$defs/{name}"
    raise SpecError(f"{where}: $ref {ref!r} does not name a schema definition ({wanted})")


def resolve(spec: Spec, schema: Json) -> Json:
    """Follow internal `$ref`s of the bundle until a schema with content."""
    seen = set()
    while "$ref" in schema:
        name = schema["$ref"].removeprefix("#/$defs/")
        if name in seen:
            raise SpecError(f"{spec.origin.get(name, name)}: $ref cycle")
        seen.add(name)
        schema = spec.defs[name]
    return schema
