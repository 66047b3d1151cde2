"""Finding elements in a snapshot by role and accessible name."""

from __future__ import annotations

import pytest

from understudy_connector import ElementNotFound, find_nodes, find_ref, render_snapshot
from understudy_connector.generated.models import SnapshotResult

from .scripted import LOGIN_SNAPSHOT

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
