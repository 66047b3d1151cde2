"""The versions this build speaks and the references it serves, from the package itself.

Everything here is read from `understudy.generated` (written by codegen from spec/), so an
installed wheel answers `/docs` and `/openapi.yaml` without the repository around it.
"""

from __future__ import annotations

from importlib import metadata, resources
from typing import Final

from understudy.generated.versions import API_VERSION, PROTOCOL_VERSIONS

__all__ = ["API_VERSION", "PAGES", "PROTOCOL_VERSIONS", "package_version", "page"]

# Served name -> (file in the package, media type).
PAGES: Final = {
    "api.html": ("api.html", "text/html; charset=utf-8"),
    "frames.html": ("frames.html", "text/html; charset=utf-8"),
    "openapi.yaml": ("openapi.yaml", "application/yaml; charset=utf-8"),
    "openapi.json": ("openapi.json", "application/json"),
}


def page(name: str) -> bytes:
    """The bytes of one packaged reference file (a name from `PAGES`)."""
    return (resources.files("understudy.generated") / "reference" / PAGES[name][0]).read_bytes()


def package_version() -> str:
    """The installed distribution's version ("unknown" in a source tree never installed)."""
    try:
        return metadata.version("understudy-backend")
    except metadata.PackageNotFoundError:
        return "unknown"
