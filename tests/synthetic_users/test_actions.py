"""Model answers are checked against the spec's action catalogue before they run."""

from __future__ import annotations

import pytest

from synthetic_users._actions import ActionError, parse_action


def test_a_valid_call_becomes_an_action_with_its_ease_apart() -> None:
    action = parse_action(
        {"name": "type", "arguments": {"ref": "g2e5", "text": "kettle", "ease": 5}}
    )
    assert (action.name, action.arguments, action.ease) == (
        "type",
        {"ref": "g2e5", "text": "kettle"},
        5,
    )
    assert action.as_dict()["arguments"]["ease"] == 5


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ({"name": "teleport", "arguments": {"ease": 3}}, "unknown action 'teleport'"),
        ({"name": "click", "arguments": {"ease": 3}}, "ref: Field required"),
        ({"name": "click", "arguments": {"ref": "g1e1"}}, "ease: Field required"),
        ({"name": "click", "arguments": {"ref": "g1e1", "ease": 9}}, "ease: Input should be less"),
        ({"name": "click", "arguments": {"ref": "#buy", "ease": 4}}, "ref: String should match"),
        ({"name": "click", "arguments": {"ref": "g1e1", "ease": 4, "x": 1}}, "x: Extra inputs"),
        (
            {"name": "react", "arguments": {"sentiment": "meh", "note": "n", "ease": 4}},
            "sentiment: Input should be",
        ),
        ({"name": "finish", "arguments": "done"}, "finish: "),
    ],
)
def test_an_invalid_call_is_refused_naming_what_to_fix(
    call: dict[str, object], message: str
) -> None:
    with pytest.raises(ActionError, match=message):
        parse_action(call)


def test_a_reaction_may_name_its_kind() -> None:
    action = parse_action(
        {
            "name": "react",
            "arguments": {
                "sentiment": "confused",
                "note": "no label",
                "kind": "unlabeled_control",
                "ease": 3,
            },
        }
    )
    assert action.arguments["kind"] == "unlabeled_control"
