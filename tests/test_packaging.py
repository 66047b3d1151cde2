"""The two Python packages install and expose a curated public surface."""

import importlib

import pytest


@pytest.mark.parametrize("name", ["understudy", "understudy_connector"])
def test_package_imports_and_declares_public_names(name: str) -> None:
    module = importlib.import_module(name)
    assert isinstance(module.__all__, list)
    assert all(isinstance(public, str) for public in module.__all__)
    assert all(hasattr(module, public) for public in module.__all__)


def test_backend_and_connector_are_separate_packages() -> None:
    backend = importlib.import_module("understudy")
    connector = importlib.import_module("understudy_connector")
    assert backend.__file__ is not None
    assert connector.__file__ is not None
    assert "backend" in backend.__file__
    assert "connector" in connector.__file__


def test_synthetic_users_never_imports_the_backend() -> None:
    """Synthetic Users is a consumer: it reaches Understudy only through the connector."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    offenders = []
    for path in [
        *(root / "synthetic-users" / "src").rglob("*.py"),
        *(root / "study").rglob("*.py"),
    ]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            offenders += [
                f"{path.relative_to(root)}: {n}" for n in names if n.split(".")[0] == "understudy"
            ]
    assert offenders == []


def test_the_backend_declares_exactly_what_the_service_imports() -> None:
    """A run-time dependency is one the service's own modules import; a test double needs none."""
    import ast
    import re
    import sys
    import tomllib
    from pathlib import Path

    backend = Path(__file__).resolve().parent.parent / "backend"
    project = tomllib.loads((backend / "pyproject.toml").read_text())["project"]
    declared = {
        re.split(r"[<>=!~ \[]", spec)[0].lower().replace("-", "_")
        for spec in project["dependencies"]
    }
    imported: set[str] = set()
    for path in (backend / "src" / "understudy").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"understudy"}
    assert "optional-dependencies" not in project
    assert third_party - declared == set()
    # uvicorn loads its WebSocket implementation by name (`ws="websockets-sansio"`), and its
    # httptools protocol, which `_server.py` subclasses, imports the parser itself.
    assert declared - third_party == {"websockets", "httptools"}


def test_the_simulated_device_is_not_part_of_the_service() -> None:
    import importlib.util

    assert importlib.util.find_spec("understudy.simdevice") is None
    assert importlib.util.find_spec("tests.support.simdevice") is not None
