"""Typed arguments to catalog commands: one builder per command, shared by Session and AsyncSession.

Each builder validates its arguments with the generated model, so a bad argument fails here, before
anything is sent, as a `UsageError` that names the field.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Literal, ParamSpec, TypeVar

from pydantic import ValidationError

from understudy_connector._exceptions import UsageError
from understudy_connector.generated import models as m

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from understudy_connector._exceptions import CommandFailed

P = ParamSpec("P")
C = TypeVar("C")

Button = Literal["left", "middle", "right"]
Modifier = Literal["Alt", "Control", "Meta", "Shift"]
ImageFormat = Literal["png", "jpeg"]
SnapshotFormat = Literal["nodes", "compact", "both"]
ElementState = Literal["visible", "hidden", "enabled", "stable", "attached"]


def invalid_arguments(command: str, error: ValidationError) -> UsageError:
    """A `UsageError` naming each rejected argument (wire names) and the rule it broke."""
    problems = "; ".join(
        f"{'.'.join(str(part) for part in item['loc']) or 'arguments'}: {item['msg']}"
        for item in error.errors()
    )
    return UsageError(f"invalid arguments for {command}: {problems}")


def _checked(command: str) -> Callable[[Callable[P, C]], Callable[P, C]]:
    def decorate(build: Callable[P, C]) -> Callable[P, C]:
        @functools.wraps(build)
        def checked(*args: P.args, **kwargs: P.kwargs) -> C:
            try:
                return build(*args, **kwargs)
            except ValidationError as exc:
                raise invalid_arguments(command, exc) from None

        return checked

    return decorate


@_checked("hello")
def hello() -> m.HelloCommand:
    return m.HelloCommand(name="hello")


@_checked("get_tabs")
def get_tabs() -> m.GetTabsCommand:
    return m.GetTabsCommand(name="get_tabs")


@_checked("snapshot")
def snapshot(
    *,
    interactive_only: bool,
    max_nodes: int,
    format: SnapshotFormat = "both",
    changes_since: str | None = None,
) -> m.SnapshotCommand:
    return m.SnapshotCommand(
        name="snapshot",
        interactive_only=interactive_only,
        max_nodes=max_nodes,
        format=format,
        changes_since=changes_since,
    )


def predates_compact(command: m.SnapshotCommand, error: CommandFailed) -> m.SnapshotCommand | None:
    """The snapshot to ask again of an extension older than `snapshot_compact_v1`, if this is one.

    Such an extension refuses a field it does not know (`format`) as `invalid_arguments`; every
    field was already valid for the spec, so that code can only mean an older extension. The
    same snapshot without `format` gets its nodes. None when the failure is another one.
    """
    if error.code != "invalid_arguments" or command.format is None:
        return None
    # None, not the model's default ("nodes"): an unset field is left off the wire.
    return m.SnapshotCommand(
        name="snapshot",
        interactive_only=command.interactive_only,
        max_nodes=command.max_nodes,
        format=None,
    )


@_checked("screenshot")
def screenshot(*, format: ImageFormat, quality: int | None, max_width: int) -> m.ScreenshotCommand:
    return m.ScreenshotCommand(
        name="screenshot", format=format, quality=quality, max_width=max_width
    )


@_checked("wait_for")
def wait_for(
    *,
    text: str | None,
    text_gone: str | None,
    url_contains: str | None,
    ref: str | None = None,
    state: ElementState | None = None,
    timeout_ms: int,
) -> m.WaitForCommand:
    if (ref is None) != (state is None):
        raise UsageError(
            "wait_for needs ref and state together, such as ref='g2e5', state='visible'"
        )
    element = ref is not None
    given = [value for value in (text, text_gone, url_contains) if value is not None]
    if len(given) + element != 1:
        raise UsageError(
            "wait_for needs exactly one of text, text_gone, url_contains or ref with state"
        )
    condition: m.TextCondition | m.UrlCondition | m.ElementCondition
    if ref is not None and state is not None:
        condition = m.ElementCondition(kind="element_state", ref=ref, state=state)
    elif text is not None:
        condition = m.TextCondition(kind="text_appears", text=text)
    elif text_gone is not None:
        condition = m.TextCondition(kind="text_disappears", text=text_gone)
    else:
        condition = m.UrlCondition(kind="url_matches", url_contains=given[0])
    return m.WaitForCommand(name="wait_for", condition=condition, timeout_ms=timeout_ms)


@_checked("navigate")
def navigate(url: str) -> m.NavigateCommand:
    return m.NavigateCommand(name="navigate", url=url)


@_checked("go_back")
def go_back() -> m.GoBackCommand:
    return m.GoBackCommand(name="go_back")


@_checked("go_forward")
def go_forward() -> m.GoForwardCommand:
    return m.GoForwardCommand(name="go_forward")


@_checked("reload")
def reload() -> m.ReloadCommand:
    return m.ReloadCommand(name="reload")


@_checked("click")
def click(ref: str, *, button: Button, click_count: int) -> m.ClickCommand:
    return m.ClickCommand(name="click", ref=ref, button=button, click_count=click_count)


@_checked("hover")
def hover(ref: str) -> m.HoverCommand:
    return m.HoverCommand(name="hover", ref=ref)


@_checked("drag")
def drag(
    ref: str, *, to: str | None, dx: int | None, dy: int | None, steps: int | None
) -> m.DragCommand:
    by_offset = dx is not None or dy is not None
    if by_offset == (to is not None):
        raise UsageError("drag needs exactly one end: to (a ref to drop on) or dx/dy (an offset)")
    if by_offset:
        return m.DragCommand(name="drag", ref=ref, dx=dx or 0, dy=dy or 0, steps=steps)
    return m.DragCommand(name="drag", ref=ref, target_ref=to, steps=steps)


@_checked("focus")
def focus(ref: str) -> m.FocusCommand:
    return m.FocusCommand(name="focus", ref=ref)


@_checked("select_text")
def select_text(
    ref: str | None, *, text: str | None, start: int | None, end: int | None
) -> m.SelectTextCommand:
    by_range = start is not None or end is not None
    if by_range and text is not None:
        raise UsageError("select_text takes text or start/end, not both")
    if by_range and (start is None or end is None or ref is None):
        raise UsageError("select_text with offsets needs ref, start and end")
    if ref is None and text is None:
        raise UsageError("select_text needs a ref (its whole text), ref with start/end, or text")
    return m.SelectTextCommand(name="select_text", ref=ref, text=text, start=start, end=end)


@_checked("type")
def type_text(ref: str, text: str, *, submit: bool) -> m.TypeCommand:
    return m.TypeCommand(name="type", ref=ref, text=text, submit=submit)


@_checked("fill")
def fill(ref: str, value: str) -> m.FillCommand:
    return m.FillCommand(name="fill", ref=ref, value=value)


@_checked("fill_secret")
def fill_secret(ref: str, secret_ref: str) -> m.FillSecretCommand:
    return m.FillSecretCommand(name="fill_secret", ref=ref, secret_ref=secret_ref)


@_checked("press_key")
def press_key(key: str, *, modifiers: Sequence[Modifier]) -> m.PressKeyCommand:
    return m.PressKeyCommand(name="press_key", key=key, modifiers=list(modifiers) or None)


@_checked("select_option")
def select_option(ref: str, values: Sequence[str]) -> m.SelectOptionCommand:
    return m.SelectOptionCommand(name="select_option", ref=ref, values=list(values))


@_checked("set_checked")
def set_checked(ref: str, checked: bool) -> m.SetCheckedCommand:
    return m.SetCheckedCommand(name="set_checked", ref=ref, checked=checked)


@_checked("scroll")
def scroll(*, ref: str | None, delta_x: int, delta_y: int) -> m.ScrollCommand:
    return m.ScrollCommand(name="scroll", ref=ref, delta_x=delta_x, delta_y=delta_y)


@_checked("switch_tab")
def switch_tab(tab_id: int) -> m.SwitchTabCommand:
    return m.SwitchTabCommand(name="switch_tab", tab_id=tab_id)
