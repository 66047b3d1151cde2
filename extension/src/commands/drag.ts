/**
 * `drag`: press the left button at the centre of an element, move in steps to the end point (the
 * centre of another element, or an offset from the start), release there. Real mouse input
 * (Input.dispatchMouseEvent) and nothing else: measured on this machine's Chromium 156 (new
 * headless), a press and moves over a `draggable` element start Chromium's own HTML5 drag, whose
 * `dragenter`/`dragover`/`drop` then follow the moves, so no drag interception
 * (Input.setInterceptDrags) is needed; pointer-event sliders and sortables see pointerdown,
 * pointermove with the button held, and pointerup. The moves are one animation frame apart, as a
 * hand's are, since libraries sample the pointer per frame.
 *
 * Before pressing, both points are hit-tested as a click's is (actionability.ts): a covered
 * source or drop target fails `element_obscured` with nothing pressed. Once pressed, a failure
 * still releases the button, so the page is not left mid-drag.
 */
import { CommandError, StaleAuthorityError } from "../errors";
import type { DragCommand, DragPreview } from "@understudy/protocol";
import { type HitPurpose, assertHitsTarget } from "./actionability";
import { type CommandContext, type WritePlan, elementPreview, remainingMs, resolveTarget } from "./context";
import { type Point, boxCentre, centreOf } from "./pointer";

export const DRAG_DEFAULT_STEPS = 10;
/** Pause between two moves: about one animation frame at 60 Hz. */
export const DRAG_STEP_MS = 16;

const START: HitPurpose = { point: "drag start", nothing: "Nothing was pressed." };
const DROP: HitPurpose = { point: "drop point", nothing: "Nothing was pressed." };

interface LayoutMetrics {
  readonly cssLayoutViewport?: { readonly clientWidth?: number; readonly clientHeight?: number };
}

/** The visible page's size in CSS pixels, or undefined when Chromium does not say. */
async function viewport(ctx: CommandContext): Promise<{ width: number; height: number } | undefined> {
  const metrics = await ctx.cdp.send<LayoutMetrics>("Page.getLayoutMetrics", {});
  const width = metrics.cssLayoutViewport?.clientWidth;
  const height = metrics.cssLayoutViewport?.clientHeight;
  return typeof width === "number" && typeof height === "number" ? { width, height } : undefined;
}

function inside(point: Point, size: { width: number; height: number } | undefined): boolean {
  return size === undefined || (point.x >= 0 && point.y >= 0 && point.x < size.width && point.y < size.height);
}

function rounded(point: Point): string {
  return `(${String(Math.round(point.x))}, ${String(Math.round(point.y))})`;
}

export async function planDrag(ctx: CommandContext, command: DragCommand, dryRun: boolean): Promise<WritePlan> {
  const byOffset = command.dx !== undefined || command.dy !== undefined;
  if (byOffset === (command.targetRef !== undefined)) {
    throw new CommandError(
      "invalid_arguments",
      "A drag needs exactly one end: targetRef (drop on that element) or dx/dy (an offset in CSS pixels from the start), not both and not neither.",
    );
  }
  const dx = command.dx ?? 0;
  const dy = command.dy ?? 0;
  if (byOffset && dx === 0 && dy === 0) {
    throw new CommandError("invalid_arguments", "A drag by dx 0 and dy 0 moves nowhere; give a non-zero offset or a targetRef.");
  }
  const source = await resolveTarget(ctx, command.ref);
  const drop = command.targetRef === undefined ? undefined : await resolveTarget(ctx, command.targetRef);
  if (drop !== undefined && drop.backendNodeId === source.backendNodeId) {
    throw new CommandError("invalid_arguments", "targetRef names the element being dragged; drop it on another element or drag by dx/dy.");
  }
  const steps = command.steps ?? DRAG_DEFAULT_STEPS;
  const endOf = async (from: Point): Promise<Point> => (drop === undefined ? { x: from.x + dx, y: from.y + dy } : boxCentre(ctx, drop.backendNodeId));

  let preview = elementPreview(source);
  if (dryRun) {
    // Where things are now: a dry run scrolls nothing. A point out of view cannot be hit-tested
    // until the drag scrolls the source into view, so only the points in view are.
    const from = await boxCentre(ctx, source.backendNodeId);
    const to = await endOf(from);
    const size = await viewport(ctx);
    if (inside(from, size)) await assertHitsTarget(ctx, source.backendNodeId, from.x, from.y, START);
    if (drop !== undefined && inside(to, size)) await assertHitsTarget(ctx, drop.backendNodeId, to.x, to.y, DROP);
    const drag: DragPreview = {
      fromX: Math.round(from.x),
      fromY: Math.round(from.y),
      toX: Math.round(to.x),
      toY: Math.round(to.y),
      steps,
      ...(drop === undefined ? {} : { dropRole: drop.role, dropName: drop.name }),
    };
    preview = { ...preview, drag };
  }
  return {
    preview,
    act: async () => {
      const from = await centreOf(ctx, source.backendNodeId);
      // The drop target is not scrolled to: that would move the source away from the press.
      const to = await endOf(from);
      const size = await viewport(ctx);
      if (!inside(to, size)) {
        throw new CommandError(
          "element_not_interactable",
          `The drop point ${rounded(to)} is outside the visible page (${String(size?.width)}×${String(size?.height)}) once the source is in view; nothing was pressed. Scroll so both ends are visible, or drag in shorter offsets.`,
        );
      }
      await assertHitsTarget(ctx, source.backendNodeId, from.x, from.y, START);
      if (drop !== undefined) await assertHitsTarget(ctx, drop.backendNodeId, to.x, to.y, DROP);
      await press(ctx, from, to, steps);
    },
  };
}

async function press(ctx: CommandContext, from: Point, to: Point, steps: number): Promise<void> {
  const mouse = (params: object): Promise<unknown> => ctx.cdp.send("Input.dispatchMouseEvent", params);
  await mouse({ type: "mouseMoved", x: from.x, y: from.y });
  await mouse({ type: "mousePressed", x: from.x, y: from.y, button: "left", buttons: 1, clickCount: 1 });
  let released = false;
  try {
    for (let i = 1; i <= steps; i += 1) {
      // Paced while the deadline allows; past it the moves still all happen, unpaced.
      if (remainingMs(ctx, DRAG_STEP_MS) >= DRAG_STEP_MS) await ctx.sleep(DRAG_STEP_MS);
      const x = from.x + ((to.x - from.x) * i) / steps;
      const y = from.y + ((to.y - from.y) * i) / steps;
      await mouse({ type: "mouseMoved", x, y, button: "left", buttons: 1 });
    }
    released = true;
    await mouse({ type: "mouseReleased", x: to.x, y: to.y, button: "left", buttons: 0, clickCount: 1 });
  } catch (error) {
    // Lost authority: send nothing more. Otherwise let go of the button before failing.
    if (!released && !(error instanceof StaleAuthorityError)) {
      await mouse({ type: "mouseReleased", x: to.x, y: to.y, button: "left", buttons: 0, clickCount: 1 }).catch(() => undefined);
    }
    throw error;
  }
}
