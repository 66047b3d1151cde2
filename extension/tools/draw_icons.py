"""Draw the extension's toolbar and store icons (16, 48 and 128 px PNGs) into `extension/static`.

The icons are drawn from geometry, not painted, so the committed files are reproducible byte for
byte: `python extension/tools/draw_icons.py` rewrites them, and a test checks that it changes
nothing. The picture: a blue rounded square (the page) with a white cursor arrow over a white
ring (a target being acted on). Only the standard library: zlib for the PNG stream, struct for
its chunks; edges are antialiased by sampling each pixel on a 4 x 4 grid.
"""

from __future__ import annotations

import math
import struct
import sys
import zlib
from pathlib import Path

STATIC = Path(__file__).resolve().parent.parent / "static"
SIZES = (16, 48, 128)
BLUE = (36, 84, 197)
WHITE = (255, 255, 255)
GRID = 4  # samples per pixel side


def _in_rounded_square(x: float, y: float) -> bool:
    radius, lo, hi = 0.22, 0.02, 0.98
    cx = min(max(x, lo + radius), hi - radius)
    cy = min(max(y, lo + radius), hi - radius)
    return lo <= x <= hi and lo <= y <= hi and (x - cx) ** 2 + (y - cy) ** 2 <= radius**2


def _in_ring(x: float, y: float) -> bool:
    distance = math.hypot(x - 0.42, y - 0.42)
    return 0.17 <= distance <= 0.27


def _in_arrow(x: float, y: float) -> bool:
    # A cursor arrow pointing up-left, its tip at the ring's centre: a triangle and a short tail.
    (x1, y1), (x2, y2), (x3, y3) = (0.42, 0.42), (0.56, 0.88), (0.88, 0.64)
    d = (y2 - y3) * (x1 - x3) + (x3 - x2) * (y1 - y3)
    a = ((y2 - y3) * (x - x3) + (x3 - x2) * (y - y3)) / d
    b = ((y3 - y1) * (x - x3) + (x1 - x3) * (y - y3)) / d
    if a >= 0 and b >= 0 and a + b <= 1:
        return True
    # The tail: a bar from the middle of the base on along the arrow's axis.
    along = ((x - 0.42) + (y - 0.42)) / math.sqrt(2)
    across = ((x - 0.42) - (y - 0.42)) / math.sqrt(2)
    return 0.45 <= along <= 0.68 and abs(across) <= 0.05


def _pixel(px: int, py: int, size: int) -> tuple[int, int, int, int]:
    blue = white = 0
    for sy in range(GRID):
        for sx in range(GRID):
            x, y = (px + (sx + 0.5) / GRID) / size, (py + (sy + 0.5) / GRID) / size
            if not _in_rounded_square(x, y):
                continue
            if _in_ring(x, y) or _in_arrow(x, y):
                white += 1
            else:
                blue += 1
    covered = blue + white
    if covered == 0:
        return (0, 0, 0, 0)
    colour = tuple(
        round((b * blue + w * white) / covered) for b, w in zip(BLUE, WHITE, strict=True)
    )
    return (colour[0], colour[1], colour[2], round(255 * covered / GRID**2))


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(size: int) -> bytes:
    """The icon at `size` x `size` pixels as an RGBA PNG."""
    rows = b"".join(
        b"\x00" + bytes(c for px in range(size) for c in _pixel(px, py, size)) for py in range(size)
    )
    header = struct.pack(">IIBBBBB", size, size, 8, 6, 0, 0, 0)  # 8-bit RGBA, no interlace
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(rows, 9))
        + _chunk(b"IEND", b"")
    )


def main() -> int:
    for size in SIZES:
        target = STATIC / f"icon-{size}.png"
        data = png(size)
        if not target.exists() or target.read_bytes() != data:
            target.write_bytes(data)
            print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
