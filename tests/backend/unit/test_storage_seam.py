"""Nothing reaches a row around the storage seam: no module function over the connection, no
update by column dictionary, and the SQLite engine's one set of repositories."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import TYPE_CHECKING

import pytest

import understudy._store
from understudy._store import Database, migrate

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

# The engine's own modules: the connection, its migrations, the seam and the dialects.
ENGINE = {"_db", "_errors", "_migrations", "_ports", "_seen", "_sql", "_storage"}
AGGREGATES = sorted(
    info.name
    for info in pkgutil.iter_modules(understudy._store.__path__)
    if info.name not in ENGINE
)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "seam.db", group_commit=False)
    migrate(database, 1.0)
    yield database
    database.close()


def test_every_aggregate_module_was_found() -> None:
    assert {"sessions", "commands", "credentials", "vault", "quotas"} <= set(AGGREGATES)


@pytest.mark.parametrize("name", AGGREGATES)
def test_no_aggregate_module_offers_a_function_over_the_connection(name: str) -> None:
    module = importlib.import_module(f"understudy._store.{name}")
    for attr, value in vars(module).items():
        if not inspect.isfunction(value) or value.__module__ != module.__name__:
            continue
        parameters = inspect.signature(value).parameters
        assert "db" not in parameters, f"{name}.{attr} takes the connection, not a repository"
        assert not any(p.kind is p.VAR_KEYWORD for p in parameters.values()), (
            f"{name}.{attr} takes **values: a change must name what it changes"
        )


@pytest.mark.parametrize("name", AGGREGATES)
def test_no_repository_method_takes_a_column_dictionary(name: str) -> None:
    module = importlib.import_module(f"understudy._store.{name}")
    for cls_name, cls in vars(module).items():
        if not inspect.isclass(cls) or cls.__module__ != module.__name__:
            continue
        for method_name, method in vars(cls).items():
            if method_name.startswith("_") or not inspect.isfunction(method):
                continue
            kinds = {p.kind for p in inspect.signature(method).parameters.values()}
            assert inspect.Parameter.VAR_KEYWORD not in kinds, f"{cls_name}.{method_name}"


def test_database_storage_is_one_object_per_database(db: Database) -> None:
    assert db.storage is db.storage
    with db.storage.transaction() as tx:
        assert tx is db.storage.repos
        assert tx.sessions.get("none") is None
