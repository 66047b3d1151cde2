"""The wheels install into a fresh virtualenv outside the repository and serve from there.

Nothing from the checkout is on the path of that environment: `/docs` and `/openapi.yaml` must
come out of the installed package, and the console scripts must start with only the declared
dependencies. Dependencies come from a local wheelhouse (`pip download` through pip's own
configured index, pinned by requirements/dev.txt), then `--no-index` installs from it alone.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("UNDERSTUDY_", "VIRTUAL_ENV", "PYTHON")) and k != "DEVICE_TOKENS"
    }


def _run(*argv: str | Path, cwd: Path, timeout: float = 300) -> str:
    done = subprocess.run(
        [str(a) for a in argv],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"{argv}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv outside the repository with the three wheels installed; returns its bin/."""
    work = tmp_path_factory.mktemp("dist")
    assert ROOT not in work.parents
    dist, wheelhouse, venv = work / "dist", work / "wheelhouse", work / "venv"
    pip = (sys.executable, "-m", "pip")
    _run(
        *pip,
        "wheel",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
        "--wheel-dir",
        dist,
        ROOT / "backend",
        ROOT / "connector",
        ROOT / "synthetic-users",
        cwd=work,
    )
    wheels = sorted(dist.glob("*.whl"))
    assert [w.name.split("-")[0] for w in wheels] == [
        "synthetic_users",
        "understudy_backend",
        "understudy_connector",
    ]
    _run(
        *pip,
        "download",
        "--quiet",
        "--only-binary=:all:",
        "--dest",
        wheelhouse,
        "--constraint",
        ROOT / "requirements" / "dev.txt",
        *wheels,
        cwd=work,
    )
    _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=work)
    _run(
        *pip,
        "--python",
        venv / "bin" / "python",
        "install",
        "--quiet",
        "--no-index",
        "--find-links",
        wheelhouse,
        "--find-links",
        dist,
        "understudy-backend",
        "understudy-connector",
        "synthetic-users",
        cwd=work,
    )
    return venv / "bin"


def test_wheels_carry_the_references_license_and_metadata(installed: Path) -> None:
    backend = next((installed.parent.parent / "dist").glob("understudy_backend-*.whl"))
    with zipfile.ZipFile(backend) as wheel:
        names = set(wheel.namelist())
        metadata = wheel.read(next(n for n in names if n.endswith("METADATA"))).decode()
    for page in ("api.html", "frames.html", "openapi.yaml", "openapi.json"):
        assert f"understudy/generated/reference/{page}" in names
    assert any(n.endswith("licenses/LICENSE") for n in names)
    assert not [n for n in names if "simdevice" in n]  # a test double, not part of the service
    assert "License-Expression: Apache-2.0" in metadata
    assert "Project-URL: Homepage" in metadata
    assert "Classifier: Typing :: Typed" in metadata
    assert "# understudy-backend" in metadata  # the readme is the long description
    required = {
        line.removeprefix("Requires-Dist: ").split("<")[0].split(">")[0]
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist: ")
    }
    # What the service imports, no more: no extras (the simulated device lives in tests/support),
    # no httpx, no PyYAML; psycopg and its pool for `UNDERSTUDY_DATABASE_URL=postgresql://…`.
    assert required == {
        "cryptography",
        "httptools",
        "litestar",
        "prometheus-client",
        "psycopg-pool",
        "psycopg[binary]",
        "pydantic",
        "pydantic-settings",
        "typing-extensions",
        "uvicorn",
        "websockets",
    }


def test_the_installed_service_serves_docs_and_spec_outside_the_repository(
    installed: Path, tmp_path: Path
) -> None:
    located = _run(
        installed / "python",
        "-I",
        "-c",
        "import understudy, understudy_connector; print(understudy.__file__); "
        "print(understudy_connector.__file__)",
        cwd=tmp_path,
    )
    assert all(str(installed.parent) in line for line in located.splitlines()), located
    assert "HTTP API 2.0.0" in _run(installed / "understudy", "--version", cwd=tmp_path)
    data_dir = tmp_path / "data"
    _run(installed / "understudy", "migrate", "--data-dir", data_dir, cwd=tmp_path)
    process = subprocess.Popen(
        [installed / "understudy", "serve", "--port", "0", "--data-dir", data_dir],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "serving on" in line, process.stderr.read() if process.stderr else line
        url = line.split()[3]
        docs = httpx.get(f"{url}/docs", timeout=10)
        assert docs.status_code == 200
        assert "Understudy" in docs.text
        assert httpx.get(f"{url}/docs/frames.html", timeout=10).status_code == 200
        spec = httpx.get(f"{url}/openapi.yaml", timeout=10)
        assert spec.status_code == 200
        assert spec.text == (ROOT / "spec" / "openapi.yaml").read_text()
        assert httpx.get(f"{url}/openapi.json", timeout=10).json()["openapi"] == "3.1.0"
        assert httpx.get(f"{url}/metrics", timeout=10).status_code == 200
    finally:
        process.terminate()
        process.communicate(timeout=30)
    _run(installed / "understudy-mcp", "--help", cwd=tmp_path)


def test_the_installed_synthetic_users_serves_its_reference_and_dashboard(
    installed: Path, tmp_path: Path
) -> None:
    located = _run(
        installed / "python",
        "-I",
        "-c",
        "import synthetic_users; print(synthetic_users.__file__)",
        cwd=tmp_path,
    )
    assert str(installed.parent) in located, located
    assert "0.1.0" in _run(installed / "synthetic-users", "--version", cwd=tmp_path)
    data_dir = tmp_path / "su-data"
    _run(installed / "synthetic-users", "--data-dir", data_dir, "migrate", cwd=tmp_path)
    process = subprocess.Popen(
        [
            installed / "synthetic-users",
            "--data-dir",
            data_dir,
            "serve",
            "--api-only",
            "--port",
            "0",
        ],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "serving on" in line, process.stderr.read() if process.stderr else line
        url = line.split()[3]
        docs = httpx.get(f"{url}/docs", timeout=10)
        assert docs.status_code == 200
        assert "Synthetic Users" in docs.text
        assert httpx.get(f"{url}/healthz", timeout=10).status_code == 200
        # The dashboard's templates and static files ship in the wheel.
        sign_in = httpx.get(f"{url}/dashboard/sign-in", timeout=10)
        assert sign_in.status_code == 200 and "API key" in sign_in.text
        assert httpx.get(f"{url}/runs", timeout=10).status_code == 401
    finally:
        process.terminate()
        process.communicate(timeout=30)
