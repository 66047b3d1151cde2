"""Reading a snapshot: find an element by role and name, or render the tree as text."""

from __future__ import annotations

from typing import TYPE_CHECKING

from understudy_connector._exceptions import ElementNotFound

if TYPE_CHECKING:
    from collections.abc import Iterator

    from understudy_connector.generated.models import SnapshotNode, SnapshotResult


def find_nodes(
    snapshot: SnapshotResult,
    *,
    role: str | None = None,
    name: str | None = None,
    exact: bool = False,
) -> Iterator[SnapshotNode]:
    """The nodes with a ref whose role and accessible name match, in document order.

    Args:
        snapshot: A `snapshot()` result.
        role: The accessibility role (`textbox`, `button`, ...), compared case-insensitively.
        name: The accessible name; a case-insensitive substring unless `exact`.
        exact: Compare `name` exactly.
    """
    wanted_role = None if role is None else role.casefold()
    wanted_name = None if name is None else (name if exact else name.casefold())
    for node in snapshot.nodes:
        if node.ref is None:
            continue
        if wanted_role is not None and node.role.casefold() != wanted_role:
            continue
        if wanted_name is not None:
            if exact and node.name != wanted_name:
                continue
            if not exact and wanted_name not in node.name.casefold():
                continue
        yield node


def find_ref(
    snapshot: SnapshotResult,
    *,
    role: str | None = None,
    name: str | None = None,
    exact: bool = False,
) -> str:
    """The ref of the first node that matches; see `find_nodes`.

    Raises:
        ElementNotFound: No node matches.
    """
    for node in find_nodes(snapshot, role=role, name=name, exact=exact):
        if node.ref is not None:
            return node.ref
    raise ElementNotFound(
        f"no element with role={role!r} and name={name!r} in the snapshot of {snapshot.title!r}"
    )


def render_snapshot(snapshot: SnapshotResult) -> str:
    """The snapshot as text for a model: its compact `text` when it has one.

    Without it (a `nodes` snapshot, or an extension that predates the compact form), the tree as
    indented text, one node per line: `- role 'name' [ref=g2e14]`, the name written as a Python
    string literal so quotes and newlines in it stay unambiguous.
    """
    if snapshot.text is not None:
        return snapshot.text
    lines = [f"# {snapshot.title} ({snapshot.url}) generation {snapshot.generation}"]
    for node in snapshot.nodes:
        details = [f"ref={node.ref}"] if node.ref is not None else []
        if node.value is not None:
            details.append(f"value={node.value!r}")
        if node.value_length is not None:
            details.append(f"value cut: {node.value_length} chars")
        for flag in ("checked", "disabled", "focused"):
            if getattr(node, flag):
                details.append(flag)
        suffix = f" [{', '.join(details)}]" if details else ""
        lines.append(f"{'  ' * node.depth}- {node.role} {node.name!r}{suffix}")
    if snapshot.truncated:
        left = ", ".join(f"{n} {role}" for role, n in sorted((snapshot.omitted or {}).items()))
        what = f": left out {left}" if left else ""
        lines.append(f"(truncated{what}; raise maxNodes or use interactiveOnly)")
    return "\n".join(lines)
