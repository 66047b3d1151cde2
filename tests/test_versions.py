"""The version numbers agree where docs/versioning.md says they must."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

from understudy.generated.versions import API_VERSION, PROTOCOL_VERSIONS

ROOT = Path(__file__).resolve().parents[1]


def _pyproject_version(package: str) -> str:
    version: str = tomllib.loads((ROOT / package / "pyproject.toml").read_text())["project"][
        "version"
    ]
    return version


def test_the_three_packages_share_one_version() -> None:
    versions = {
        "backend": _pyproject_version("backend"),
        "connector": _pyproject_version("connector"),
        "extension manifest": json.loads((ROOT / "extension" / "manifest.json").read_text())[
            "version"
        ],
        "extension package": json.loads((ROOT / "extension" / "package.json").read_text())[
            "version"
        ],
        **{
            f"@understudy/{name}": json.loads(
                (ROOT / "packages" / name / "package.json").read_text()
            )["version"]
            for name in ("protocol", "connector")
        },
    }
    assert len(set(versions.values())) == 1, versions


def test_the_changelog_has_an_entry_for_the_current_version() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## \[([^\]]+)\]", changelog, re.MULTILINE)
    assert headings[0] == "Unreleased" or headings[0] == _pyproject_version("backend")
    assert _pyproject_version("backend") in headings


def test_the_versions_the_package_reports_are_the_specs() -> None:
    spec = (ROOT / "spec" / "openapi.yaml").read_text()
    info = re.search(r"^info:\n(?:  .*\n)*?  version: (\S+)$", spec, re.MULTILINE)
    assert info is not None
    assert info[1] == API_VERSION
    common = json.loads((ROOT / "spec" / "frames" / "common.json").read_text())
    assert tuple(common["$defs"]["ProtocolVersion"]["enum"]) == PROTOCOL_VERSIONS
