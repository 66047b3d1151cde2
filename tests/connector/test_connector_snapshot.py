"""Reading snapshots: finding elements, rendering them, and snapshots of older extensions."""

from __future__ import annotations

import pytest

from understudy_connector import (
    CommandFailed,
    ElementNotFound,
    find_nodes,
    find_ref,
    render_snapshot,
)
from understudy_connector.generated.models import SnapshotResult

from .scripted import LOGIN_SNAPSHOT, MakeClient, outcome, session, tombstone

PAGE = SnapshotResult.model_validate(LOGIN_SNAPSHOT)


def test_find_ref_matches_role_and_name_case_insensitively() -> None:
    assert find_ref(PAGE, role="textbox", name="username") == "g2e5"
    assert find_ref(PAGE, role="TEXTBOX", name="pass") == "g2e6"
    assert find_ref(PAGE, role="button") == "g2e7"


def test_exact_names_must_match_exactly() -> None:
    assert find_ref(PAGE, name="Sign in", exact=True) == "g2e7"
    with pytest.raises(ElementNotFound):
        find_ref(PAGE, name="sign in", exact=True)


def test_nodes_without_a_ref_are_never_returned() -> None:
    assert [node.ref for node in find_nodes(PAGE, name="Sign in")] == ["g2e7"]


def test_a_missing_element_is_an_error_naming_the_query() -> None:
    with pytest.raises(ElementNotFound, match="checkbox"):
        find_ref(PAGE, role="checkbox")


def test_render_shows_the_tree_with_refs() -> None:
    lines = render_snapshot(PAGE).splitlines()
    assert lines[0] == "# Sign in (https://example.com/login) generation 2"
    assert lines[1] == "- RootWebArea 'Sign in'"
    assert lines[2] == "  - textbox 'Username' [ref=g2e5]"


def test_render_gives_the_compact_text_when_the_snapshot_has_it() -> None:
    compact = SnapshotResult.model_validate(
        {**LOGIN_SNAPSHOT, "nodes": [], "text": '# Sign in\nbutton "Sign in" [g2e7]'}
    )
    assert render_snapshot(compact) == '# Sign in\nbutton "Sign in" [g2e7]'


def test_render_of_nodes_says_what_was_cut_and_left_out() -> None:
    nodes = [
        {"ref": "g2e5", "role": "textbox", "name": "Bio", "depth": 1, "value": "x" * 1000},
    ]
    nodes[0]["valueLength"] = 1398
    page = SnapshotResult.model_validate(
        {**LOGIN_SNAPSHOT, "nodes": nodes, "truncated": True, "omitted": {"link": 4, "button": 1}}
    )
    lines = render_snapshot(page).splitlines()
    assert lines[1].endswith("value cut: 1398 chars]")
    assert (
        lines[-1] == "(truncated: left out 1 button, 4 link; raise maxNodes or use interactiveOnly)"
    )


OLDER_EXTENSION = ("invalid_arguments", "snapshot.format: unknown field")


def test_an_extension_that_predates_the_compact_form_still_gives_its_nodes(
    make_client: MakeClient,
) -> None:
    client, backend = make_client(
        session(201),
        outcome("snapshot", status="failed", error=OLDER_EXTENSION),
        outcome("snapshot"),
        tombstone(),
    )
    with client.session(allowed_origins=["https://example.com"], profile_state_key="p") as live:
        page = live.snapshot(interactive_only=True)
    assert page.text is None
    assert find_ref(page, role="button") == "g2e7"
    sent = [request.body["command"] for request in backend.requests[1:3]]
    assert sent == [
        {"name": "snapshot", "interactiveOnly": True, "maxNodes": 1000, "format": "both"},
        {"name": "snapshot", "interactiveOnly": True, "maxNodes": 1000},
    ]


def test_a_format_asked_for_is_never_silently_dropped(make_client: MakeClient) -> None:
    client, backend = make_client(
        session(201), outcome("snapshot", status="failed", error=OLDER_EXTENSION), tombstone()
    )
    with client.session(allowed_origins=["https://example.com"], profile_state_key="p") as live:
        with pytest.raises(CommandFailed, match="invalid_arguments"):
            live.snapshot(format="compact")
    assert len([r for r in backend.requests if r.body and "command" in r.body]) == 1
