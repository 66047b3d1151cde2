"""Zod schemas (TypeScript runtime validators) for the command catalog and the HTTP bodies.

The TypeScript connector validates what it sends (a tool call's arguments) and what it receives
(every response body) with these, as the Python connector does with its Pydantic models. Only the
JSON Schema keywords the spec uses are translated; any other keyword stops codegen, naming the
definition, so a schema is never silently validated more loosely than it reads.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codegen._bundle import Spec

# The definitions the connector validates, and everything they refer to.
ROOTS = (
    "Command",
    "CommandRequest",
    "CommandOutcome",
    "CommandPending",
    "Problem",
    "Session",
    "SessionTombstone",
    "DeviceList",
    "UnattendedSessionRequest",
)

# Keywords that say nothing a validator checks.
_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "examples",
        "default",
        "$comment",
        "x-understudy-kind",
        "deprecated",
        "contentEncoding",
        "contentMediaType",
    }
)
_HANDLED = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "const",
        "enum",
        "items",
        "minItems",
        "maxItems",
        "uniqueItems",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "oneOf",
        "anyOf",
        "allOf",
        "discriminator",
        "$ref",
    }
)


def render_zod(spec: Spec, header: str) -> str:
    """The source of `zod.ts`: one exported schema per definition reachable from `ROOTS`."""
    defs = spec.bundle["$defs"]
    order = _order(defs, list(ROOTS))
    lines = [
        f"// {header}",
        "",
        'import { z } from "zod";',
        "",
    ]
    for name in order:
        schema = defs[name]
        expr = _expr(schema, name)
        doc = schema.get("description")
        if doc:
            lines.append("/** " + " ".join(str(doc).split()).replace("*/", "* /") + " */")
        lines.append(f"export const {name} = {expr};")
        lines.append("")
    lines.append("/** Every schema above, by definition name. */")
    lines.append("export const SCHEMAS = {")
    lines.extend(f"  {name}," for name in order)
    lines.append("} as const;")
    lines.append("")
    return "\n".join(lines)


def _refs(node: Any) -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            found.append(ref.removeprefix("#/$defs/"))
        for key, value in node.items():
            if key != "examples":
                found.extend(_refs(value))
    elif isinstance(node, list):
        for item in node:
            found.extend(_refs(item))
    return found


def _order(defs: dict[str, Any], roots: list[str]) -> list[str]:
    """Definitions reachable from `roots`, each after those it refers to."""
    done: list[str] = []
    visiting: set[str] = set()

    def visit(name: str) -> None:
        if name in done:
            return
        if name in visiting:
            raise SystemExit(f"codegen: zod: {name} refers to itself; recursion is not supported")
        if name not in defs:
            raise SystemExit(f"codegen: zod: $ref to unknown definition {name}")
        visiting.add(name)
        for ref in _refs(defs[name]):
            visit(ref)
        visiting.discard(name)
        done.append(name)

    for root in roots:
        visit(root)
    return done


def _lit(value: Any) -> str:
    return json.dumps(value)


def _expr(schema: Any, where: str) -> str:
    if schema is True or schema == {}:
        return "z.unknown()"
    if not isinstance(schema, dict):
        raise SystemExit(f"codegen: zod: {where}: unsupported schema {schema!r}")
    unknown = set(schema) - _HANDLED - _ANNOTATIONS
    if unknown:
        raise SystemExit(f"codegen: zod: {where}: unsupported keywords {sorted(unknown)}")
    expr = _core(schema, where)
    doc = schema.get("description")
    if doc and "$ref" not in schema:
        expr += f".describe({_lit(' '.join(str(doc).split()))})"
    return expr


def _core(schema: dict[str, Any], where: str) -> str:
    if "$ref" in schema:
        rest = set(schema) - {"$ref"} - _ANNOTATIONS
        if rest:
            raise SystemExit(f"codegen: zod: {where}: $ref beside {sorted(rest)}")
        return str(schema["$ref"]).removeprefix("#/$defs/")
    if "allOf" in schema:
        parts = [_expr(part, f"{where}/allOf") for part in schema["allOf"]]
        base = {k: v for k, v in schema.items() if k != "allOf"}
        if set(base) - _ANNOTATIONS:
            parts.append(_expr(base, where))
        expr = parts[0]
        for part in parts[1:]:
            expr = f"z.intersection({expr}, {part})"
        return expr
    for key in ("oneOf", "anyOf"):
        if key in schema:
            options = [_expr(option, f"{where}/{key}") for option in schema[key]]
            prop = (schema.get("discriminator") or {}).get("propertyName")
            if prop is not None:
                return f"z.discriminatedUnion({_lit(prop)}, [{', '.join(options)}])"
            return f"z.union([{', '.join(options)}])"
    if "const" in schema:
        return f"z.literal({_lit(schema['const'])})"
    if "enum" in schema:
        values = schema["enum"]
        if all(isinstance(v, str) for v in values):
            return f"z.enum([{', '.join(_lit(v) for v in values)}])"
        return f"z.union([{', '.join(f'z.literal({_lit(v)})' for v in values)}])"
    kind = schema.get("type")
    if isinstance(kind, list):
        options = [_core({**schema, "type": one}, where) for one in kind]
        return f"z.union([{', '.join(options)}])"
    if kind == "object" or "properties" in schema:
        return _object(schema, where)
    if kind == "array":
        item = _expr(schema.get("items", True), f"{where}/items")
        least = int(schema.get("minItems", 0))
        if least:
            # A tuple with a rest element, as json-schema-to-typescript types `minItems`.
            expr = f"z.tuple([{', '.join([item] * least)}], {item})"
            if "maxItems" in schema:
                most = schema["maxItems"]
                expr += (
                    f".refine((items) => items.length <= {most}, "
                    f'{{ message: "at most {most} items" }})'
                )
        else:
            expr = f"z.array({item})"
            if "maxItems" in schema:
                expr += f".max({schema['maxItems']})"
        if schema.get("uniqueItems"):
            expr += (
                ".refine((items) => new Set(items.map((item) => JSON.stringify(item))).size"
                ' === items.length, { message: "items must be unique" })'
            )
        return expr
    if kind == "string":
        fmt = schema.get("format")
        string = {
            None: "z.string()",
            "date-time": "z.iso.datetime({ offset: true })",
            "uuid": "z.guid()",
            "uri": "z.url()",
        }.get(fmt)
        if string is None:
            raise SystemExit(f"codegen: zod: {where}: unsupported string format {fmt!r}")
        expr = string
        if "minLength" in schema:
            expr += f".min({schema['minLength']})"
        if "maxLength" in schema:
            expr += f".max({schema['maxLength']})"
        if "pattern" in schema:
            expr += f'.regex(new RegExp({_lit(schema["pattern"])}, "u"))'
        return expr
    if kind in ("integer", "number"):
        expr = "z.number().int()" if kind == "integer" else "z.number()"
        if "minimum" in schema:
            expr += f".min({schema['minimum']})"
        if "maximum" in schema:
            expr += f".max({schema['maximum']})"
        return expr
    if kind == "boolean":
        return "z.boolean()"
    if kind == "null":
        return "z.null()"
    raise SystemExit(f"codegen: zod: {where}: unsupported type {kind!r}")


def _object(schema: dict[str, Any], where: str) -> str:
    required = set(schema.get("required", []))
    props = schema.get("properties", {})
    missing = required - set(props)
    if missing:
        raise SystemExit(f"codegen: zod: {where}: required but not declared: {sorted(missing)}")
    fields = []
    for prop, sub in props.items():
        expr = _expr(sub, f"{where}/{prop}")
        if prop not in required:
            expr += ".optional()"
        fields.append(f"{_lit(prop)}: {expr}")
    body = "{ " + ", ".join(fields) + " }" if fields else "{}"
    extra = schema.get("additionalProperties", True)
    if extra is False:
        expr = f"z.strictObject({body})"
    elif extra is True:
        expr = f"z.looseObject({body})"
    else:
        expr = f"z.object({body}).catchall({_expr(extra, f'{where}/additionalProperties')})"
    if "maxProperties" in schema:
        bound = schema["maxProperties"]
        expr += (
            f".refine((value) => Object.keys(value).length <= {bound}, "
            f'{{ message: "at most {bound} properties" }})'
        )
    return expr
