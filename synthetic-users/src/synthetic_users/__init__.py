"""Synthetic Users: persona runs against a customer's site, driven through Understudy."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
