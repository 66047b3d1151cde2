"""A benchmark's server picks its own port and says which; the benchmark reads it back."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench._server import serving_port

if TYPE_CHECKING:
    from pathlib import Path


def test_the_port_is_read_from_the_served_line_once_it_is_printed(tmp_path: Path) -> None:
    output = tmp_path / "server.log"
    assert serving_port(output) is None  # not started yet
    output.write_text("WARNING: a line before it\n")
    assert serving_port(output) is None
    with output.open("a") as more:
        more.write(
            "understudy: serving on http://127.0.0.1:41234 "
            "(API reference at http://127.0.0.1:41234/docs)\n"
        )
    assert serving_port(output) == 41234


def test_the_synthetic_users_service_line_names_its_port_the_same_way(tmp_path: Path) -> None:
    output = tmp_path / "serve.log"
    output.write_text("synthetic-users: serving on http://127.0.0.1:39001 (reference at …/docs)\n")
    assert serving_port(output) == 39001
