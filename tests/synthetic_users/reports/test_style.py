"""The report stylesheet keeps text readable: WCAG contrast of every text colour it uses."""

from __future__ import annotations

import re
from importlib.resources import files

import pytest

CSS = (files("synthetic_users._reports") / "templates" / "_style.css").read_text()
COLOURS = dict(re.findall(r"--([a-z]+):\s*(#[0-9a-f]{6})", CSS))
WHITE, PANEL = "#ffffff", COLOURS["panel"]


def luminance(hex_colour: str) -> float:
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.mark.parametrize("name", ["ink", "muted", "accent", "good", "bad", "warn"])
@pytest.mark.parametrize("background", [WHITE, PANEL], ids=["white", "panel"])
def test_every_text_colour_meets_wcag_aa_on_every_background(name: str, background: str) -> None:
    assert contrast(COLOURS[name], background) >= 4.5


def test_the_contrast_formula_is_the_wcag_one() -> None:
    assert contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast("#777777", "#ffffff") == pytest.approx(4.48, abs=0.01)
