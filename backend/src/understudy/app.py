"""The Litestar application, kept at its old import path: see `understudy.http`."""

from understudy.http import create_app

__all__ = ["create_app"]
