"""The Synthetic Users spec is valid and meaningful, and its generated models round-trip it."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from typing import Any

import jsonschema
import pytest
from openapi_spec_validator import validate as validate_openapi
from openapi_spec_validator.readers import read_from_filename
from pydantic import TypeAdapter

import synthetic_users.generated.models as models
from codegen._bundle import ROOT, SU_OPENAPI, SU_SCHEMAS, SpecError, load_synthetic_users
from codegen._checks import check_synthetic_users_meaning
from codegen._outputs import GENERATED_DIRS, SU_PACKAGE_DIR, action_names, problem_codes

SPEC = load_synthetic_users()
EXAMPLES = [
    pytest.param(name, i, example, id=f"{name}[{i}]")
    for name, schema in SPEC.defs.items()
    for i, example in enumerate(schema["examples"])
]
# The brief's actions, then the inbox's (issue 17), then `finish`, which is always last.
ACTIONS = (
    *("click", "type", "fill", "select_option", "press_key", "scroll", "navigate", "react"),
    *("read_inbox", "wait_for_email"),
)


def _validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(
        {**schema, "$defs": SPEC.defs}, format_checker=jsonschema.FormatChecker()
    )


def test_openapi_document_validates() -> None:
    spec_dict, base_uri = read_from_filename(str(SU_OPENAPI))
    validate_openapi(spec_dict, base_uri=base_uri)


@pytest.mark.parametrize("path", sorted(SU_SCHEMAS.glob("*.json")), ids=lambda p: p.name)
def test_schema_file_is_a_valid_2020_12_schema(path: Any) -> None:
    jsonschema.Draft202012Validator.check_schema(json.loads(path.read_text()))


def test_the_schema_files_the_reports_need_are_all_there() -> None:
    names = {p.name for p in SU_SCHEMAS.glob("*.json")}
    assert {"reaction.json", "action.json", "turn.json", "transcript.json"} <= names
    assert {"report.json", "aggregate.json"} <= names
    # Each whole-file schema is bundled under its title.
    for name in ("Reaction", "Action", "Turn", "Transcript", "Report", "Aggregate", "Persona"):
        assert SPEC.origin[name].endswith(".json#"), name


@pytest.mark.parametrize(("name", "index", "example"), EXAMPLES)
def test_example_validates_against_its_schema(name: str, index: int, example: Any) -> None:
    assert list(_validator(SPEC.defs[name]).iter_errors(example)) == []


@pytest.mark.parametrize(("name", "index", "example"), EXAMPLES)
def test_example_round_trips_through_generated_python(name: str, index: int, example: Any) -> None:
    adapter: TypeAdapter[Any] = TypeAdapter(getattr(models, name))
    parsed = adapter.validate_json(json.dumps(example))
    wire = adapter.dump_python(parsed, mode="json", by_alias=True, exclude_none=True)
    assert list(_validator(SPEC.defs[name]).iter_errors(wire)) == []
    assert adapter.validate_json(json.dumps(wire)) == parsed
    as_given = adapter.dump_python(parsed, mode="json", by_alias=True, exclude_unset=True)
    assert as_given == example


def test_the_action_catalogue_is_the_briefs_and_every_action_requires_ease() -> None:
    # log_in is offered only to runs with a credential (issue 17, safety model).
    assert action_names(SPEC) == [*ACTIONS, "finish", "log_in"]
    from synthetic_users.generated.catalog import ACTION_NAMES

    assert list(ACTION_NAMES) == action_names(SPEC)
    adapter: TypeAdapter[Any] = TypeAdapter(models.Action)
    click = adapter.validate_python({"name": "click", "arguments": {"ref": "g2e14", "ease": 7}})
    assert isinstance(click, models.ClickAction)
    with pytest.raises(ValueError, match="ease"):
        adapter.validate_python({"name": "click", "arguments": {"ref": "g2e14"}})
    with pytest.raises(ValueError, match="less than or equal to 7"):
        adapter.validate_python(
            {"name": "finish", "arguments": {"success": True, "summary": "x", "ease": 8}}
        )
    with pytest.raises(ValueError, match="extra"):
        adapter.validate_python({"name": "click", "arguments": {"ref": "g2e14", "ease": 5, "x": 1}})
    with pytest.raises(ValueError, match="does not match any of the expected tags"):
        adapter.validate_python({"name": "hover", "arguments": {"ref": "g2e14", "ease": 5}})


def test_run_request_refuses_what_the_brief_calls_bad_input() -> None:
    ok = {"target_url": "https://shop.example/", "task": "Buy", "personas": [{"name": "A"}]}
    models.RunRequest.model_validate(ok)
    for bad in (
        {**ok, "personas": []},
        {**ok, "personas": [{"name": f"P{i}"} for i in range(11)]},
        {**ok, "surprise": 1},
        {**ok, "target_url": "/relative"},
        {**ok, "target_url": "ftp://shop.example/"},
        {**ok, "turn_budget": 0},
    ):
        with pytest.raises(ValueError):
            models.RunRequest.model_validate_json(json.dumps(bad))


def test_a_saved_persona_is_referenced_by_id_in_a_run() -> None:
    ref = {"persona_id": "per_5f1d2c3b4a594e8fa7b6c5d4e3f2a1b0"}
    request = models.RunRequest.model_validate(
        {"target_url": "https://a.example", "task": "t", "personas": [ref, {"name": "B"}]}
    )
    assert isinstance(request.personas[0], models.PersonaRef)
    assert isinstance(request.personas[1], models.PersonaInput)
    assert request.personas[1].digital_literacy == "medium"


def test_every_error_response_carries_problem_codes() -> None:
    codes = problem_codes(SPEC)
    assert codes["createRun"]["400"] == [
        "validation_failed",
        "invalid_json",
        "target_not_allowed",
        "target_unresolvable",
    ]
    assert codes["createRun"]["409"] == ["idempotency_conflict"]
    assert codes["createRun"]["429"] == ["rate_limited", "too_many_active_runs"]
    assert codes["getSessionScreenshot"]["404"] == [
        "run_not_found",
        "session_not_found",
        "artifact_not_found",
    ]
    assert codes["getRunReportHtml"]["404"] == ["run_not_found", "artifact_not_found"]
    for oid, by_status in codes.items():
        if oid != "getHealth":
            assert by_status["401"] == ["unauthorized"], oid
            assert "rate_limited" in by_status["429"], oid
    # Every operation on a run, its sessions or their artifacts says the run may have expired.
    for path, item in SPEC.openapi["paths"].items():
        for method, op in item.items():
            if path.startswith("/runs/") and isinstance(op, dict) and "responses" in op:
                assert codes[op["operationId"]]["410"] == ["run_expired"], (path, method)


def test_the_seeds_paths_and_field_names_are_the_apis() -> None:
    paths = SPEC.openapi["paths"]
    assert {"post", "get"} <= set(paths["/runs"])
    assert {"get", "delete"} <= set(paths["/runs/{run_id}"])
    for name in ("report.json", "report.md", "report.html"):
        assert f"/runs/{{run_id}}/{name}" in paths
    for name in ("transcript.json.gz", "report.json", "report.md", "report.html"):
        assert f"/runs/{{run_id}}/sessions/{{session_id}}/{name}" in paths
    request = SPEC.defs["RunRequest"]["properties"]
    assert set(request) == {
        *("target_url", "task", "personas"),
        *("turn_budget", "credential_id", "model"),
    }
    assert SPEC.defs["RunCreated"]["required"] == ["run_id", "status"]


def _broken(mutate: Any) -> Any:
    defs = copy.deepcopy(SPEC.defs)
    mutate(defs)
    return dataclasses.replace(SPEC, defs=defs)


def test_the_meaning_check_accepts_the_spec() -> None:
    check_synthetic_users_meaning(SPEC)


def test_the_meaning_check_rejects_an_action_without_ease() -> None:
    def drop_ease(defs: dict[str, Any]) -> None:
        defs["ScrollAction"]["properties"]["arguments"]["required"].remove("ease")

    with pytest.raises(SpecError, match=r"action\.json#/\$defs/ScrollAction: scroll's arguments"):
        check_synthetic_users_meaning(_broken(drop_ease))


def test_the_meaning_check_rejects_an_action_missing_from_the_name_enum() -> None:
    def drop_name(defs: dict[str, Any]) -> None:
        defs["ActionName"]["enum"].remove("react")

    with pytest.raises(SpecError, match="ActionName: enum must list exactly"):
        check_synthetic_users_meaning(_broken(drop_name))


def test_the_meaning_check_rejects_an_object_open_to_unknown_fields() -> None:
    def open_it(defs: dict[str, Any]) -> None:
        del defs["Turn"]["properties"]["observation"]["additionalProperties"]

    with pytest.raises(SpecError, match=r"turn\.json#/properties/observation: an object must"):
        check_synthetic_users_meaning(_broken(open_it))


def test_the_meaning_check_rejects_a_secured_operation_without_401() -> None:
    api = copy.deepcopy(SPEC.openapi)
    del api["paths"]["/personas"]["get"]["responses"]["401"]
    with pytest.raises(SpecError, match="/paths//personas/get: needs an API key"):
        check_synthetic_users_meaning(dataclasses.replace(SPEC, openapi=api))


def test_check_codegen_covers_every_folder_codegen_writes() -> None:
    makefile = (ROOT / "Makefile").read_text()
    match = re.search(r"^GENERATED := ((?:.*\\\n)*.*)$", makefile, re.M)
    assert match, "no GENERATED list in the Makefile"
    listed = set(match.group(1).replace("\\\n", " ").split())
    assert SU_PACKAGE_DIR in listed
    assert set(GENERATED_DIRS) <= listed


def test_the_generated_base_class_says_this_wire_is_snake_case() -> None:
    wire = (ROOT / SU_PACKAGE_DIR / "_wire.py").read_text()
    assert "camelCase" not in wire
    assert "Synthetic Users API" in wire
