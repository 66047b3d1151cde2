"""The enterprise policy example in docs/guide/install-extension.md is complete and valid for the
extension as built: the right extension id, every key of managed_schema.json, values the
extension's enrollment checks accept."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "guide" / "install-extension.md"
SCHEMA = json.loads((ROOT / "extension" / "managed_schema.json").read_text())
# The same rules as extension/src/config/enrollment.ts (validateEnrollment).
DEVICE_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
EXACT_ORIGIN = re.compile(r"^(https://[a-z0-9.-]+(:\d+)?|http://(127\.0\.0\.1|localhost)(:\d+)?)$")


def _extension_id() -> str:
    found = re.search(
        r'EXTENSION_ID = "([a-p]{32})"', (ROOT / "extension" / "src" / "extensionId.ts").read_text()
    )
    assert found is not None
    return found[1]


def _policy_example() -> dict[str, Any]:
    text = PAGE.read_text()
    block = re.search(r"<!-- policy-example:[^>]*-->\n```json\n(.*?)\n```", text, re.DOTALL)
    assert block is not None, "the policy example block is gone"
    policy: dict[str, Any] = json.loads(block[1])
    return policy


def test_the_policy_example_targets_the_extensions_fixed_id() -> None:
    extensions = _policy_example()["3rdparty"]["extensions"]
    assert list(extensions) == [_extension_id()]
    assert _extension_id() in PAGE.read_text().split("## 1.")[0]  # named up front too


def test_the_policy_example_sets_every_managed_key_and_matches_the_schema() -> None:
    (settings,) = _policy_example()["3rdparty"]["extensions"].values()
    assert set(settings) == set(SCHEMA["properties"])
    jsonschema.validate(settings, SCHEMA)
    assert set(settings["localOriginPolicy"]) == {"mode", "origins"}


def test_the_policy_example_passes_the_extensions_enrollment_rules() -> None:
    (settings,) = _policy_example()["3rdparty"]["extensions"].values()
    assert EXACT_ORIGIN.fullmatch(settings["serviceOrigin"])
    assert DEVICE_ID.fullmatch(settings["deviceId"])
    credential = settings["deviceCredential"]
    assert credential.startswith("udc_")
    assert not re.search(r"\s", credential)
    assert settings["localOriginPolicy"]["mode"] == "allowlist"
    assert all(EXACT_ORIGIN.fullmatch(o) for o in settings["localOriginPolicy"]["origins"])


def test_every_key_of_the_schema_is_explained_on_the_page() -> None:
    text = PAGE.read_text()
    for key in SCHEMA["properties"]:
        assert f"| `{key}` |" in text, key
