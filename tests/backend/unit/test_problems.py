"""Every problem the service can send has its code in the spec's catalog, and its title from it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from understudy import _allocation, coordinator
from understudy._problems import ProblemError, problem_response
from understudy.generated.catalog import PROBLEM_CODES, PROBLEM_TITLES
from understudy.http._errors import LITESTAR_CODES

PACKAGE = Path(coordinator.__file__).parent
# Calls whose code is a variable, and every value that variable can hold.
DYNAMIC_CODES: dict[tuple[str, str], set[str]] = {
    ("_allocation.py", "conflict"): set(_allocation._CONFLICT_DETAIL),
    ("http/_errors.py", "code"): {*LITESTAR_CODES.values(), "invalid_request"},
}


def _sources() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py")) if "generated" not in p.parts]


def _codes_sent() -> dict[str, set[str]]:
    """Code -> where: each `ProblemError(status, code, …)` and each `{"code": …}` literal."""
    found: dict[str, set[str]] = {}
    unresolved = []
    for path in _sources():
        rel = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            codes: set[str] = set()
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ProblemError":
                arg = node.args[1] if len(node.args) > 1 else None
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    codes = {arg.value}
                elif isinstance(arg, ast.Name) and (rel, arg.id) in DYNAMIC_CODES:
                    codes = DYNAMIC_CODES[(rel, arg.id)]
                else:
                    unresolved.append(f"{rel}:{node.lineno}")
            elif isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "code":
                        if isinstance(value, ast.Constant) and isinstance(value.value, str):
                            codes.add(value.value)
            for code in codes:
                found.setdefault(code, set()).add(f"{rel}:{getattr(node, 'lineno', 0)}")
    assert unresolved == [], "list the codes these calls can send in DYNAMIC_CODES"
    return found


def test_every_code_the_service_sends_has_a_catalog_title() -> None:
    sent = _codes_sent()
    assert {"writes_blocked", "invalid_request", "request_timeout"} <= set(sent)
    untitled = {code: sorted(where) for code, where in sent.items() if code not in PROBLEM_TITLES}
    assert untitled == {}


def test_every_code_a_response_documents_has_a_title() -> None:
    documented = {c for statuses in PROBLEM_CODES.values() for cs in statuses.values() for c in cs}
    assert documented - set(PROBLEM_TITLES) == set()


@pytest.mark.parametrize("code", sorted(PROBLEM_TITLES))
def test_the_problem_body_carries_the_catalog_title_and_type(code: str) -> None:
    body = problem_response(ProblemError(409, code, "why")).content
    assert body["title"] == PROBLEM_TITLES[code]
    assert body["type"] == f"https://understudy.dev/problems/{code}"


def test_writes_blocked_has_its_own_title() -> None:
    assert PROBLEM_TITLES["writes_blocked"] == "Writes blocked on this session"
