"""Checks of meaning that a schema validator does not make.

Each failure raises `SpecError` naming the file and the definition, so a mistake in the spec is
reported where it was made, not as a confusing error from a downstream generator.
"""

from __future__ import annotations

from typing import Any

import jsonschema
from openapi_spec_validator import validate as validate_openapi

from codegen._bundle import OPENAPI, SPEC, Spec, SpecError, resolve
from codegen._protocol import check_constants

Json = dict[str, Any]
KINDS = {"read", "write"}


def check_meaning(spec: Spec) -> None:
    """The Understudy spec (`load()`): documents, examples, unions, the command catalog."""
    _check_documents(spec, OPENAPI.as_uri(), "frames")
    _check_catalog(spec)
    _check_problems(spec)
    _check_problem_titles(spec)
    check_constants(spec)


def check_synthetic_users_meaning(spec: Spec) -> None:
    """The Synthetic Users spec (`load_synthetic_users()`).

    Beyond the checks both specs share: the action catalogue (one branch per `ActionName`, each
    with closed `arguments` that require `ease`), closed objects everywhere (so the generated
    models refuse unknown fields), and `401` documented wherever a key is required.
    """
    _check_documents(spec, (SPEC / spec.openapi_file).as_uri(), "synthetic-users/schemas")
    _check_actions(spec)
    _check_closed_objects(spec)
    _check_problems(spec)
    _check_auth_documented(spec)


def _check_documents(spec: Spec, base_uri: str, schema_dir: str) -> None:
    try:
        validate_openapi(spec.openapi, base_uri=base_uri)
    except Exception as exc:  # the validator raises several unrelated types
        raise SpecError(f"{spec.openapi_file}: {exc}") from exc
    for fname, doc in spec.frame_files.items():
        try:
            jsonschema.Draft202012Validator.check_schema(doc)
        except jsonschema.SchemaError as exc:
            raise SpecError(f"{schema_dir}/{fname}: {exc.message} at {exc.json_path}") from exc
    _check_examples(spec)
    for name, schema in spec.defs.items():
        if "discriminator" in schema:
            _check_discriminator(spec, name, schema)


def _check_actions(spec: Spec) -> None:
    action = spec.defs.get("Action")
    where = "synthetic-users/schemas/action.json"
    if action is None or "discriminator" not in action:
        raise SpecError(f"{where}: `Action` must be a discriminated union")
    mapping = action["discriminator"]["mapping"]
    if action["discriminator"]["propertyName"] != "name":
        raise SpecError(f"{spec.origin['Action']}: actions are discriminated by `name`")
    if set(spec.defs["ActionName"]["enum"]) != set(mapping):
        raise SpecError(f"{spec.origin['ActionName']}: enum must list exactly {sorted(mapping)}")
    for value, ref in mapping.items():
        where = spec.origin[ref.removeprefix("#/$defs/")]
        branch = resolve(spec, {"$ref": ref})
        if set(branch.get("required", [])) != {"name", "arguments"}:
            raise SpecError(f"{where}: an action requires exactly `name` and `arguments`")
        args = branch["properties"].get("arguments", {})
        if args.get("additionalProperties") is not False:
            raise SpecError(f"{where}: {value}'s arguments must set additionalProperties: false")
        ease = args.get("properties", {}).get("ease", {})
        if "ease" not in args.get("required", []) or ease.get("$ref") != "#/$defs/Ease":
            raise SpecError(f"{where}: {value}'s arguments must require `ease` (the Ease schema)")


def _check_closed_objects(spec: Spec) -> None:
    """Every object with `properties` says `additionalProperties: false`."""

    def walk(node: Any, where: str) -> None:
        if isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{where}/{i}")
            return
        if not isinstance(node, dict):
            return
        if "properties" in node and node.get("additionalProperties") is not False:
            # An allOf refinement of a closed base (`*Problem`) adds no field of its own.
            if not set(node["properties"]) <= set(spec.defs["Problem"]["properties"]):
                raise SpecError(f"{where}: an object must set additionalProperties: false")
        for key, value in node.items():
            if key not in ("examples", "example", "const", "default", "enum"):
                walk(value, f"{where}/{key}")

    for name, schema in spec.defs.items():
        walk(schema, spec.origin[name])


def _check_auth_documented(spec: Spec) -> None:
    default = spec.openapi.get("security") or []
    for path, item in spec.openapi["paths"].items():
        for method, op in item.items():
            if not isinstance(op, dict) or "responses" not in op:
                continue
            secured = op["security"] if "security" in op else default
            if secured and "401" not in op["responses"]:
                raise SpecError(
                    f"{spec.openapi_file}#/paths/{path}/{method}: needs an API key, so it "
                    "must document 401"
                )


def _check_examples(spec: Spec) -> None:
    for name, schema in spec.defs.items():
        examples = schema.get("examples")
        if not examples:
            raise SpecError(f"{spec.origin[name]}: every schema carries `examples`")
        validator = jsonschema.Draft202012Validator(
            {**schema, "$defs": spec.defs}, format_checker=jsonschema.FormatChecker()
        )
        for i, example in enumerate(examples):
            error = jsonschema.exceptions.best_match(validator.iter_errors(example))
            if error is not None:
                raise SpecError(
                    f"{spec.origin[name]}: examples[{i}] {error.json_path}: {error.message}"
                )


def _check_discriminator(spec: Spec, name: str, schema: Json) -> None:
    where = spec.origin[name]
    prop = schema["discriminator"]["propertyName"]
    mapping = schema["discriminator"].get("mapping")
    if not mapping:
        raise SpecError(f"{where}: a discriminator needs an explicit mapping")
    branches = [b["$ref"] for b in schema.get("oneOf", [])]
    if set(branches) != set(mapping.values()):
        raise SpecError(f"{where}: oneOf branches and discriminator mapping differ")
    for value, ref in mapping.items():
        branch = resolve(spec, {"$ref": ref})
        field = branch.get("properties", {}).get(prop, {})
        field = resolve(spec, field) if "$ref" in field else field
        allowed = [field["const"]] if "const" in field else field.get("enum", [])
        if value not in allowed:
            raise SpecError(
                f"{where}: mapping {value!r} -> {ref} but that branch's {prop!r} is {allowed}"
            )
        if prop not in branch.get("required", []):
            raise SpecError(f"{where}: branch {ref} must require {prop!r}")


def _check_catalog(spec: Spec) -> None:
    kinds: dict[str, str] = {}
    for ref in spec.defs["Command"]["discriminator"]["mapping"].values():
        branch = resolve(spec, {"$ref": ref})
        kind = branch.get("x-understudy-kind")
        if kind not in KINDS:
            raise SpecError(f"{ref}: x-understudy-kind must be read or write, not {kind!r}")
        kinds[branch["properties"]["name"]["const"]] = kind
    for enum_name, want in (
        ("CommandName", set(kinds)),
        ("ReadCommandName", {n for n, k in kinds.items() if k == "read"}),
        ("WriteCommandName", {n for n, k in kinds.items() if k == "write"}),
    ):
        if set(spec.defs[enum_name]["enum"]) != want:
            raise SpecError(f"{spec.origin[enum_name]}: enum must list exactly {sorted(want)}")
    results = spec.defs["CommandResult"]["discriminator"]["mapping"]
    if set(results) != set(kinds):
        raise SpecError(
            f"{spec.origin['CommandResult']}: mapping must cover every command: "
            f"missing {sorted(set(kinds) - set(results))}"
        )


def response_problem_codes(spec: Spec, response: Json) -> list[str]:
    """The `code` values a problem+json response may carry ([] when it is not a problem)."""
    response = _component(spec, response)
    content = response.get("content", {}).get("application/problem+json")
    if content is None:
        return []
    schema = _schema(spec, content["schema"])
    for part in schema.get("allOf", []):
        code = part.get("properties", {}).get("code", {})
        if "const" in code:
            return [code["const"]]
        if "enum" in code:
            return list(code["enum"])
    return []


def _check_problems(spec: Spec) -> None:
    for path, item in spec.openapi["paths"].items():
        for method, op in item.items():
            if not isinstance(op, dict) or "responses" not in op:
                continue
            where = f"{spec.openapi_file}#/paths/{path}/{method}"
            if "operationId" not in op:
                raise SpecError(f"{where}: missing operationId")
            for status, response in op["responses"].items():
                resolved = _component(spec, response)
                if int(status) >= 400 and "application/problem+json" in resolved.get("content", {}):
                    if not response_problem_codes(spec, response):
                        raise SpecError(
                            f"{where}/responses/{status}: problem without a `code` list"
                        )
                if int(status) >= 400 and not resolved.get("content"):
                    raise SpecError(f"{where}/responses/{status}: an error must have a body")


PROBLEM_TITLES = "x-understudy-problems"
_PROBLEM_BASE = "https://understudy.dev/problems/"


def _check_problem_titles(spec: Spec) -> None:
    """`components.x-understudy-problems` titles every code that a response or example uses.

    RFC 9457 §3.1.3: a type's title does not change from occurrence to occurrence, so each
    problem example must carry its code's title and the type URI that names the code.
    """
    where = f"{spec.openapi_file}#/components/{PROBLEM_TITLES}"
    titles = spec.openapi.get("components", {}).get(PROBLEM_TITLES)
    if not isinstance(titles, dict) or not titles:
        raise SpecError(f"{where}: map every problem code to its title")
    for code, title in titles.items():
        if not isinstance(title, str) or not title.strip():
            raise SpecError(f"{where}/{code}: a title is a non-empty string")
    for path, item in spec.openapi["paths"].items():
        for method, op in item.items():
            if not isinstance(op, dict) or "responses" not in op:
                continue
            for status, response in op["responses"].items():
                for code in response_problem_codes(spec, response):
                    if code not in titles:
                        raise SpecError(
                            f"{spec.openapi_file}#/paths/{path}/{method}/responses/{status}: "
                            f"problem code {code!r} has no title in {where}"
                        )
    for name, schema in spec.defs.items():
        for i, example in enumerate(schema.get("examples", [])):
            if not (isinstance(example, dict) and {"type", "title", "code"} <= set(example)):
                continue
            code = example["code"]
            if code not in titles:
                raise SpecError(
                    f"{spec.origin[name]}: examples[{i}] code {code!r} is not in {where}"
                )
            if example["title"] != titles[code]:
                raise SpecError(
                    f"{spec.origin[name]}: examples[{i}] title {example['title']!r}; "
                    f"{code!r} is titled {titles[code]!r}"
                )
            if example["type"] != _PROBLEM_BASE + code:
                raise SpecError(
                    f"{spec.origin[name]}: examples[{i}] type must be {_PROBLEM_BASE + code}"
                )


def _component(spec: Spec, node: Json) -> Json:
    while "$ref" in node and node["$ref"].startswith("#/components/"):
        kind, name = node["$ref"].removeprefix("#/components/").split("/", 1)
        node = spec.openapi["components"][kind][name]
    return node


def _schema(spec: Spec, node: Json) -> Json:
    ref = node.get("$ref", "")
    if ref.startswith("#/components/schemas/"):
        return spec.defs[ref.rsplit("/", 1)[1]]
    return node
