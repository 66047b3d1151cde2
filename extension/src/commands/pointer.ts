/**
 * `click`, `hover`, `scroll`: pointer input at the centre of a resolved element's box
 * (DOM.getBoxModel + Input.dispatchMouseEvent), after scrolling it into view and waiting for the
 * box to stop moving. A click is hit-tested at that point first and fails `element_obscured`
 * when something else is on top (see actionability.ts). A dry-run click also previews the
 * navigation the element declares (see clickNavigation.ts).
 */
import { CommandError, StaleAuthorityError } from "../errors";
import type { ClickCommand, HoverCommand, ScrollCommand } from "@understudy/protocol";
import { assertHitsTarget, waitUntilStable } from "./actionability";
import { clickNavigationPreview } from "./clickNavigation";
import { type CommandContext, type WritePlan, elementPreview, resolveTarget } from "./context";
import { MODIFIER_BITS } from "./keys";

interface BoxModel {
  readonly model: { readonly content: readonly number[] };
}

export interface Point {
  readonly x: number;
  readonly y: number;
}

/** The centre of the element's box, scrolled into view and at rest. */
export async function centreOf(ctx: CommandContext, backendNodeId: number): Promise<Point> {
  const scrolled = ctx.cdp.send("DOM.scrollIntoViewIfNeeded", { backendNodeId }).then(
    () => undefined,
    (error: unknown) => {
      if (error instanceof StaleAuthorityError) throw error;
      // Not every node can scroll (text, hidden); getBoxModel below decides whether it is usable.
    },
  );
  // A box read mid-transition (an opening accordion, a smooth scroll) sends the press where the
  // element was, not where it comes to rest. Sent right behind the scroll rather than after its
  // answer: the page runs the debugger session's calls in the order sent, so the check's first
  // sample already sees the element scrolled (a smooth scroll then shows as movement); only the
  // wait for the scroll's answer goes.
  const stable = waitUntilStable(ctx, backendNodeId);
  await Promise.all([scrolled, stable]);
  return boxCentre(ctx, backendNodeId);
}

/** The centre of the element's box where it is now: no scrolling, no waiting. */
export async function boxCentre(ctx: CommandContext, backendNodeId: number): Promise<Point> {
  let box: BoxModel;
  try {
    box = await ctx.cdp.send<BoxModel>("DOM.getBoxModel", { backendNodeId });
  } catch (error) {
    if (error instanceof StaleAuthorityError) throw error;
    throw new CommandError("element_not_interactable", "The element has no layout box (hidden or detached); take a new snapshot and pick a visible element.");
  }
  const quad = box.model.content;
  const xs = [quad[0], quad[2], quad[4], quad[6]].map(Number);
  const ys = [quad[1], quad[3], quad[5], quad[7]].map(Number);
  if (xs.some(Number.isNaN) || ys.some(Number.isNaN)) {
    throw new CommandError("element_not_interactable", "The element has no usable box; take a new snapshot and pick a visible element.");
  }
  return { x: xs.reduce((a, b) => a + b, 0) / 4, y: ys.reduce((a, b) => a + b, 0) / 4 };
}

export async function planClick(ctx: CommandContext, command: ClickCommand, dryRun: boolean): Promise<WritePlan> {
  const target = await resolveTarget(ctx, command.ref);
  const button = command.button ?? "left";
  const clickCount = command.clickCount ?? 1;
  // Only a dry run asks the page where the click goes. The answer is a prediction (script may
  // cancel or redirect the click), so a real click is never refused on it: the navigation it
  // actually makes meets the origin guard (and a popup the popup guard).
  const navigation = dryRun ? await clickNavigationPreview(ctx, target.backendNodeId) : undefined;
  // Held keys go on every event of the click, as a person's held Control or Shift would.
  const modifiers = (command.modifiers ?? []).reduce((bits, key) => bits | MODIFIER_BITS[key], 0);
  return {
    preview: { ...elementPreview(target), ...navigation },
    act: async () => {
      const { x, y } = await centreOf(ctx, target.backendNodeId);
      // Before any input event: a covered target fails with nothing pressed, instead of the
      // press landing on whatever is on top (a cookie wall, a modal's backdrop).
      await assertHitsTarget(ctx, target.backendNodeId, x, y);
      // Sent together, not one after another's answer: the debugger session delivers them in
      // order and the browser queues input for the page, so the page sees the same move, press
      // and release; only the waits for each acknowledgement overlap (about two thirds of a
      // click's input time here). A click is then never left half done (pressed, not released)
      // by an authority check failing between its events.
      await Promise.all([
        ctx.cdp.send("Input.dispatchMouseEvent", { type: "mouseMoved", x, y, modifiers }),
        ctx.cdp.send("Input.dispatchMouseEvent", { type: "mousePressed", x, y, button, clickCount, modifiers }),
        ctx.cdp.send("Input.dispatchMouseEvent", { type: "mouseReleased", x, y, button, clickCount, modifiers }),
      ]);
    },
  };
}

export async function planHover(ctx: CommandContext, command: HoverCommand): Promise<WritePlan> {
  const target = await resolveTarget(ctx, command.ref);
  return {
    preview: elementPreview(target),
    act: async () => {
      const { x, y } = await centreOf(ctx, target.backendNodeId);
      await ctx.cdp.send("Input.dispatchMouseEvent", { type: "mouseMoved", x, y });
    },
  };
}

export async function planScroll(ctx: CommandContext, command: ScrollCommand): Promise<WritePlan> {
  const target = command.ref === undefined ? undefined : await resolveTarget(ctx, command.ref);
  const deltaX = command.deltaX ?? 0;
  const deltaY = command.deltaY ?? 0;
  return {
    preview: target === undefined ? { allowed: true } : elementPreview(target),
    act: async () => {
      if (target !== undefined) await ctx.cdp.send("DOM.scrollIntoViewIfNeeded", { backendNodeId: target.backendNodeId });
      if (deltaX !== 0 || deltaY !== 0) {
        // Both deltas are validated integers, so the expression carries no caller text.
        await ctx.cdp.send("Runtime.evaluate", { expression: `window.scrollBy(${deltaX}, ${deltaY})` });
      }
    },
  };
}
