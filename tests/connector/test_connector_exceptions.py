"""The exception tree: one class per problem code of the spec, in three families."""

from __future__ import annotations

import pytest

import understudy_connector as connector
from understudy_connector import (
    PROBLEM_CLASSES,
    CommandOutcomeUnknown,
    ProblemError,
    ResponseValidationError,
    UnderstudyError,
    UsageError,
)
from understudy_connector._exceptions import SPEC_PROBLEM_CODES, problem_class
from understudy_connector.generated.catalog import PROBLEM_CODES
from understudy_connector.generated.models import Problem


def _statuses(code: str) -> set[int]:
    return {
        int(status)
        for responses in PROBLEM_CODES.values()
        for status, codes in responses.items()
        if code in codes
    }


def test_every_problem_code_of_the_spec_has_its_own_class() -> None:
    assert SPEC_PROBLEM_CODES, "the generated catalog lists no problem codes"
    assert set(PROBLEM_CLASSES) == SPEC_PROBLEM_CODES
    classes = list(PROBLEM_CLASSES.values())
    assert ProblemError not in classes
    assert len(set(classes)) == len(classes), "two codes share a class"


@pytest.mark.parametrize("code", sorted(SPEC_PROBLEM_CODES))
def test_each_problem_class_matches_its_code_and_status(code: str) -> None:
    cls = PROBLEM_CLASSES[code]
    assert issubclass(cls, ProblemError)
    assert cls.CODE == code
    assert _statuses(code) == {cls.STATUS}
    assert getattr(connector, cls.__name__) is cls, "every problem class is public"
    assert cls.__name__ in (connector._exceptions.__doc__ or "")


def test_a_problem_error_carries_the_problem_fields() -> None:
    problem = Problem.model_validate(
        {
            "type": "https://understudy.dev/problems/command_outcome_unknown",
            "title": "Command outcome unknown",
            "status": 409,
            "code": "command_outcome_unknown",
            "detail": "the extension restarted during the write",
            "commandId": "c3a1e0f2-94d1-4b5e-8d5c-0e6f1a2b3c4d",
            "retryPolicy": "do_not_retry",
        }
    )
    error = problem_class(problem.code)(problem, retry_after=2.0)
    assert isinstance(error, CommandOutcomeUnknown)
    assert (error.status, error.code, error.retry_after) == (409, "command_outcome_unknown", 2.0)
    assert error.detail == "the extension restarted during the write"
    assert str(error.command_id) == "c3a1e0f2-94d1-4b5e-8d5c-0e6f1a2b3c4d"
    assert "command_outcome_unknown" in str(error)


def test_an_unknown_code_maps_to_the_base_class() -> None:
    assert problem_class("brand_new_code") is ProblemError


def test_the_three_families_are_apart() -> None:
    assert issubclass(connector.SessionClosedError, UsageError)
    assert not issubclass(UsageError, ProblemError)
    assert not issubclass(ResponseValidationError, (UsageError, ProblemError))
    for name in connector.__all__:
        value = getattr(connector, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, UnderstudyError), name
