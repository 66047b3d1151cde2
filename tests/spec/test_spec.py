"""The spec is valid, its examples are valid, and generated Python models round-trip them."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import jsonschema
import pytest
from openapi_spec_validator import validate as validate_openapi
from openapi_spec_validator.readers import read_from_filename
from pydantic import TypeAdapter

import understudy.generated.models as backend_models
import understudy_connector.generated.models as connector_models
from codegen._bundle import FRAMES, OPENAPI, SpecError, load
from codegen._checks import check_meaning
from codegen._outputs import command_kinds

SPEC = load()
EXAMPLES = [
    pytest.param(name, i, example, id=f"{name}[{i}]")
    for name, schema in SPEC.defs.items()
    for i, example in enumerate(schema["examples"])
]


def _validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(
        {**schema, "$defs": SPEC.defs}, format_checker=jsonschema.FormatChecker()
    )


def test_openapi_document_validates() -> None:
    spec_dict, base_uri = read_from_filename(str(OPENAPI))
    validate_openapi(spec_dict, base_uri=base_uri)


@pytest.mark.parametrize("path", sorted(FRAMES.glob("*.json")), ids=lambda p: p.name)
def test_frame_file_is_a_valid_2020_12_schema(path: Any) -> None:
    jsonschema.Draft202012Validator.check_schema(json.loads(path.read_text()))


@pytest.mark.parametrize(("name", "index", "example"), EXAMPLES)
def test_example_validates_against_its_schema(name: str, index: int, example: Any) -> None:
    errors = list(_validator(SPEC.defs[name]).iter_errors(example))
    assert errors == []


@pytest.mark.parametrize("models", [backend_models, connector_models], ids=["backend", "connector"])
@pytest.mark.parametrize(("name", "index", "example"), EXAMPLES)
def test_example_round_trips_through_generated_python(
    models: Any, name: str, index: int, example: Any
) -> None:
    adapter: TypeAdapter[Any] = TypeAdapter(getattr(models, name))
    parsed = adapter.validate_json(json.dumps(example))
    wire = adapter.dump_python(parsed, mode="json", by_alias=True, exclude_none=True)
    # What Python emits is valid on the wire and means the same thing.
    assert list(_validator(SPEC.defs[name]).iter_errors(wire)) == []
    assert adapter.validate_json(json.dumps(wire)) == parsed
    # Nothing the example said is lost or renamed.
    as_given = adapter.dump_python(parsed, mode="json", by_alias=True, exclude_unset=True)
    assert as_given == example


def test_generated_models_refuse_unknown_fields_and_nulls() -> None:
    adapter: TypeAdapter[Any] = TypeAdapter(backend_models.DeviceClientFrame)
    with pytest.raises(ValueError, match="extra"):
        adapter.validate_json('{"type": "heartbeat", "seq": 1, "freeCapacity": 2, "x": 1}')
    with pytest.raises(ValueError, match="omit optional fields instead of sending null: tabId"):
        adapter.validate_json(
            json.dumps({**SPEC.defs["DeviceClientProvisionAck"]["examples"][0], "tabId": None})
        )


def _unique_items_places() -> list[tuple[str, str]]:
    return [
        (name, prop)
        for name, schema in SPEC.defs.items()
        for prop, sub in (schema.get("properties") or {}).items()
        if isinstance(sub, dict) and sub.get("uniqueItems")
    ]


@pytest.mark.parametrize("models", [backend_models, connector_models], ids=["backend", "connector"])
@pytest.mark.parametrize(("name", "prop"), _unique_items_places())
def test_generated_models_refuse_repeated_items_where_the_spec_says_unique_items(
    models: Any, name: str, prop: str
) -> None:
    example = SPEC.defs[name]["examples"][0]
    one = example.get(prop) or ["Shift"]  # press_key's example has no modifiers
    model = getattr(models, name)
    model.model_validate_json(json.dumps({**example, prop: one}))
    repeated = {**example, prop: [one[0], *one]}
    with pytest.raises(ValueError, match=f"{prop}: list each item once"):
        model.model_validate_json(json.dumps(repeated))


def test_every_unique_items_place_is_enforced() -> None:
    # The list above is read from the spec; make sure it is not empty by accident.
    assert ("PressKeyCommand", "modifiers") in _unique_items_places()
    assert ("DeviceClientHello", "capabilities") in _unique_items_places()


def test_discriminated_unions_pick_the_branch_named_by_type() -> None:
    adapter: TypeAdapter[Any] = TypeAdapter(backend_models.SessionServerFrame)
    frame = adapter.validate_json(json.dumps(SPEC.defs["SessionServerWriteGrant"]["examples"][0]))
    assert isinstance(frame, backend_models.SessionServerWriteGrant)
    assert isinstance(frame.command, backend_models.ClickCommand)


def test_every_command_is_read_or_write_and_the_catalog_is_complete() -> None:
    kinds = command_kinds(SPEC)
    assert set(kinds) == {
        "hello",
        "get_tabs",
        "snapshot",
        "screenshot",
        "wait_for",
        "navigate",
        "go_back",
        "go_forward",
        "reload",
        "click",
        "hover",
        "drag",
        "focus",
        "select_text",
        "type",
        "fill",
        "fill_secret",
        "press_key",
        "select_option",
        "set_checked",
        "scroll",
        "switch_tab",
    }
    assert {n for n, k in kinds.items() if k == "read"} == {
        "hello",
        "get_tabs",
        "snapshot",
        "screenshot",
        "wait_for",
    }


def test_write_prepare_carries_no_command_arguments() -> None:
    # The metadata-only rule of the write protocol is part of the schema, not a convention.
    props = SPEC.defs["SessionServerWritePrepare"]["properties"]
    assert "command" not in props
    assert "secretValue" not in props
    assert SPEC.defs["SessionServerWritePrepare"]["additionalProperties"] is False


# The design's status table per operation, plus `429 rate_limited` wherever a credential is
# checked: the per-credential abuse backstop answers it on every authenticated operation.
FROZEN_CONTRACT = {
    ("/v1/sessions", "post"): {
        "200",
        "201",
        "202",
        "400",
        "401",
        "403",
        "404",
        "409",
        "429",
        "503",
    },
    ("/v1/sessions/{sessionId}", "get"): {"200", "401", "404", "410", "429"},
    ("/v1/sessions/{sessionId}", "delete"): {"200", "202", "401", "404", "429"},
    ("/v1/sessions/{sessionId}/commands", "post"): {
        "200",
        "202",
        "400",
        "401",
        "404",
        "409",
        "410",
        "426",
        "429",
        "503",
        "504",
    },
    ("/v1/sessions/{sessionId}/commands/{commandId}", "get"): {
        "200",
        "202",
        "401",
        "404",
        "409",
        "429",
        "504",
    },
    ("/v1/devices", "get"): {"200", "401", "429"},
    ("/v1/device/connect-ticket", "post"): {"200", "400", "401", "429"},
}


@pytest.mark.parametrize(("path", "method"), sorted(FROZEN_CONTRACT))
def test_the_fixed_http_contract_is_documented(path: str, method: str) -> None:
    responses = SPEC.openapi["paths"][path][method]["responses"]
    assert set(responses) == FROZEN_CONTRACT[(path, method)]


def test_problem_codes_of_the_contract() -> None:
    from understudy.generated.catalog import PROBLEM_CODES

    assert PROBLEM_CODES["createSession"]["409"] == [
        "idempotency_conflict",
        "origin_conflict",
        "profile_conflict",
    ]
    assert PROBLEM_CODES["createSession"]["429"] == ["capacity_exhausted", "rate_limited"]
    assert PROBLEM_CODES["submitCommand"]["409"] == [
        "command_outcome_unknown",
        "command_id_conflict",
        "writes_blocked",
    ]
    assert PROBLEM_CODES["submitCommand"]["504"] == ["command_not_started", "command_timed_out"]
    assert PROBLEM_CODES["submitCommand"]["429"] == ["session_busy", "rate_limited"]
    assert PROBLEM_CODES["submitCommand"]["410"] == ["session_terminal"]


def test_links_let_a_stateful_fuzzer_follow_a_session() -> None:
    create = SPEC.openapi["paths"]["/v1/sessions"]["post"]["responses"]
    assert {"GetSession", "DeleteSession", "SubmitCommand"} <= set(create["201"]["links"])
    pending = SPEC.openapi["components"]["responses"]["CommandPending"]
    assert pending["links"]["PollCommand"] == {"$ref": "#/components/links/PollCommand"}
    assert SPEC.openapi["components"]["links"]["PollCommand"]["operationId"] == "pollCommand"


def _with_titles(change: Any) -> Any:
    api = copy.deepcopy(SPEC.openapi)
    change(api["components"]["x-understudy-problems"])
    return dataclasses.replace(SPEC, openapi=api)


def test_every_problem_code_and_example_title_comes_from_the_problem_catalog() -> None:
    check_meaning(SPEC)
    with pytest.raises(SpecError, match="problem code 'writes_blocked' has no title"):
        check_meaning(_with_titles(lambda titles: titles.pop("writes_blocked")))
    with pytest.raises(SpecError, match="examples\\[0\\] title 'Session busy'"):
        check_meaning(_with_titles(lambda titles: titles.update(session_busy="Busy")))


def test_the_generated_catalog_titles_every_code_of_the_spec() -> None:
    from understudy.generated.catalog import PROBLEM_TITLES

    assert PROBLEM_TITLES == SPEC.openapi["components"]["x-understudy-problems"]
    assert PROBLEM_TITLES["writes_blocked"]
