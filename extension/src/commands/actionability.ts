/**
 * Checks a pointer write makes between resolving its element and pressing: the element's box has
 * stopped moving, and the element itself (not something on top of it) is what the pointer would
 * hit. Both run inside `act`, after `started`, and dispatch no input: a failure here is a failed
 * write with nothing pressed.
 */
import { CommandError, StaleAuthorityError } from "../errors";
import { type CommandContext, remainingMs } from "./context";
import { callOnElement } from "./pageCall";

/**
 * How long a pointer write waits for a moving element to come to rest. Long enough for the usual
 * UI transitions (accordions, slide-ins: 150–600 ms), short enough that an element animated
 * forever fails quickly instead of eating the command's deadline.
 */
export const SETTLE_MAX_MS = 1_000;
/**
 * Animation frames over which the box must stay the same to count as settled, counted from a
 * sample taken when the check starts: 1 is Playwright's "stable" on Chromium (the same box over
 * one frame), without waiting for a first frame before the first sample.
 */
export const STABLE_FRAMES = 1;

/**
 * Samples the element's box at once and then once per animation frame until it stayed the same
 * over `frames` consecutive frames. A CSS transition or animation has advanced by the next
 * frame's callbacks, and a script animation that moves the element every frame has moved it by
 * then too (its callback was queued before this one), so one frame tells a moving box from a
 * resting one. "stable", "moving" (still changing when `maxMs` ran out), "detached", or
 * "unrendered" when the document is hidden or painted no frame at all in that time (nothing can
 * be judged, so the caller goes on as before this check existed).
 */
export const STABILITY_FUNCTION = `function (maxMs, frames) {
  const el = this;
  // A hidden document (a session's tab behind another in its window) paints no frames; waiting
  // for some would only stall every click by maxMs.
  if (document.visibilityState !== "visible") return Promise.resolve("unrendered");
  if (!el.isConnected) return Promise.resolve("detached");
  const boxOf = () => {
    const r = el.getBoundingClientRect();
    return [r.x, r.y, r.width, r.height];
  };
  return new Promise((resolve) => {
    let last = boxOf();
    let same = 0;
    let sampled = 0;
    const timer = setTimeout(() => resolve(sampled === 0 ? "unrendered" : "moving"), maxMs);
    const step = () => {
      if (!el.isConnected) { clearTimeout(timer); resolve("detached"); return; }
      const box = boxOf();
      sampled += 1;
      same = box.every((v, i) => v === last[i]) ? same + 1 : 0;
      last = box;
      if (same >= frames) { clearTimeout(timer); resolve("stable"); return; }
      requestAnimationFrame(step);
    };
    requestAnimationFrame(step);
  });
}`;

/** Waits (within the command's deadline) until the element's box stops moving. */
export async function waitUntilStable(ctx: CommandContext, backendNodeId: number): Promise<void> {
  const maxMs = remainingMs(ctx, SETTLE_MAX_MS);
  const status = await callOnElement(ctx, backendNodeId, STABILITY_FUNCTION, [maxMs, STABLE_FRAMES], { awaitPromise: true });
  switch (status) {
    case "stable":
    case "unrendered":
      return;
    case "detached":
      throw new CommandError("ref_not_found", "The element left the page before it could be used; take a new snapshot and use its refs.");
    default:
      throw new CommandError(
        "element_not_interactable",
        `The element kept moving for ${maxMs} ms (an animation or transition that does not end); nothing was pressed. Wait for the page to settle (wait_for), then try again, or pick another element.`,
      );
  }
}

/**
 * Whether `hit` is the target for a pointer: the target itself, anything inside it (through
 * shadow roots and same-process frames), an <area> of the image map an <img> target uses, or a
 * <label> whose control is the target (a click there reaches the control, as the browser
 * forwards label clicks).
 */
const HIT_FUNCTION = `function (hit) {
  for (let n = hit; n; ) {
    if (n === this) return "target";
    // Up the rendered (flat) tree: slotted content sits inside the slot it renders in, so a hit
    // on a <span> slotted into a shadow <button> is a hit on the button. (A closed shadow root
    // hides assignedSlot; such a hit then climbs the light tree.)
    if (n.assignedSlot) n = n.assignedSlot;
    else if (n.parentNode) n = n.parentNode;
    else if (n.nodeType === 11 && n.host) n = n.host;
    else if (n.nodeType === 9 && n.defaultView) n = n.defaultView.frameElement;
    else n = null;
  }
  // An image map's <area> is hit in place of the <img> that uses the map.
  const map = hit.localName === "area" ? hit.closest("map") : null;
  const useMap = typeof this.useMap === "string" ? this.useMap : "";
  if (map !== null && useMap !== "" && (useMap === "#" + map.name || useMap === "#" + map.id)) return "target";
  const label = hit.closest ? hit.closest("label") : null;
  return label !== null && label.control === this ? "label" : "other";
}`;

/** Frames a hit may sit inside before the check gives up climbing to the target's frame. */
const MAX_FRAME_DEPTH = 4;
const MAX_DESCRIPTION_VALUE = 40;
const MAX_DESCRIBED_CLASSES = 3;
const DESCRIBED_ATTRIBUTES = ["id", "class", "role", "aria-label", "title", "name"] as const;

interface NodeForLocation {
  readonly backendNodeId: number;
  readonly frameId?: string;
}

interface DescribedNode {
  readonly node?: { readonly localName?: string; readonly nodeName?: string; readonly attributes?: readonly string[] };
}

/**
 * Fails `element_obscured` unless a press at (x, y) would reach the target. Chromium's own hit
 * test (DOM.getNodeForLocation) answers what is on top there, honouring `pointer-events: none`
 * and looking into user-agent shadow DOM (a press on an <input>'s inner editor is a press on the
 * input). A point over an out-of-process iframe hits the <iframe> element itself; refs name
 * main-frame nodes only, so such a target is compared as the element it is in its own frame.
 */
/** How a hit-test failure names the point and what did not happen there. */
export interface HitPurpose {
  /** "click point", "drag start", "drop point". */
  readonly point: string;
  /** "Nothing was clicked." */
  readonly nothing: string;
}

const CLICK_PURPOSE: HitPurpose = { point: "click point", nothing: "Nothing was clicked." };

export async function assertHitsTarget(
  ctx: CommandContext,
  backendNodeId: number,
  x: number,
  y: number,
  purpose: HitPurpose = CLICK_PURPOSE,
): Promise<void> {
  let hit: NodeForLocation;
  try {
    hit = await ctx.cdp.send<NodeForLocation>("DOM.getNodeForLocation", {
      x: Math.round(x),
      y: Math.round(y),
      includeUserAgentShadowDOM: true,
      ignorePointerEventsNone: false,
    });
  } catch (error) {
    if (error instanceof StaleAuthorityError) throw error;
    throw new CommandError(
      "element_not_interactable",
      `The element's ${purpose.point} is outside the visible page (nothing is there to press); scroll it into view or pick another element.`,
    );
  }
  if (hit.backendNodeId === backendNodeId) return;
  let candidate = hit;
  for (let depth = 0; depth < MAX_FRAME_DEPTH; depth += 1) {
    const verdict = await hitVerdict(ctx, backendNodeId, candidate.backendNodeId);
    if (verdict === "target" || verdict === "label") return;
    if (verdict === "other") break;
    // "elsewhere": the hit lives in another frame's script world; climb to its <iframe> owner.
    if (candidate.frameId === undefined) break;
    const owner = await frameOwner(ctx, candidate.frameId);
    if (owner === undefined) break;
    if (owner.backendNodeId === backendNodeId) return;
    candidate = owner;
  }
  const cover = await describeNode(ctx, hit.backendNodeId);
  throw new CommandError(
    "element_obscured",
    `Another element is on top of the target at its ${purpose.point} (${Math.round(x)}, ${Math.round(y)}): ${cover}. ${purpose.nothing} ` +
      "Close or dismiss the covering element (take a snapshot to find its close button), scroll the target clear of it, or pick another element.",
  );
}

async function hitVerdict(ctx: CommandContext, targetNodeId: number, hitNodeId: number): Promise<"target" | "label" | "other" | "elsewhere"> {
  let hitObject: string | undefined;
  try {
    const resolved = await ctx.cdp.send<{ object?: { objectId?: string } }>("DOM.resolveNode", { backendNodeId: hitNodeId });
    hitObject = resolved.object?.objectId;
  } catch (error) {
    if (error instanceof StaleAuthorityError) throw error;
  }
  if (hitObject === undefined) return "other";
  try {
    const value = await callOnElement(ctx, targetNodeId, HIT_FUNCTION, [], { objectArguments: [hitObject] });
    return value === "target" || value === "label" ? value : "other";
  } catch (error) {
    if (error instanceof StaleAuthorityError) throw error;
    // Chromium refuses an argument from another JavaScript world (a node of a child frame).
    return "elsewhere";
  }
}

async function frameOwner(ctx: CommandContext, frameId: string): Promise<NodeForLocation | undefined> {
  try {
    const owner = await ctx.cdp.send<{ backendNodeId?: number }>("DOM.getFrameOwner", { frameId });
    return owner.backendNodeId === undefined ? undefined : { backendNodeId: owner.backendNodeId };
  } catch (error) {
    if (error instanceof StaleAuthorityError) throw error;
    return undefined;
  }
}

/** A short, tag-like description of a node: `<div id="cookie-wall" class="modal open" role="dialog">`. */
export async function describeNode(ctx: CommandContext, backendNodeId: number): Promise<string> {
  let described: DescribedNode;
  try {
    described = await ctx.cdp.send<DescribedNode>("DOM.describeNode", { backendNodeId });
  } catch (error) {
    if (error instanceof StaleAuthorityError) throw error;
    return "an element that is gone already";
  }
  const tag = (described.node?.localName ?? described.node?.nodeName ?? "element").toLowerCase().slice(0, MAX_DESCRIPTION_VALUE);
  const attributes = described.node?.attributes ?? [];
  const parts = [tag];
  for (const wanted of DESCRIBED_ATTRIBUTES) {
    for (let i = 0; i + 1 < attributes.length; i += 2) {
      if (attributes[i] !== wanted) continue;
      let value = String(attributes[i + 1]).replace(/\s+/g, " ").trim();
      if (wanted === "class") value = value.split(" ").slice(0, MAX_DESCRIBED_CLASSES).join(" ");
      if (value === "") continue;
      const short = value.length > MAX_DESCRIPTION_VALUE ? `${value.slice(0, MAX_DESCRIPTION_VALUE)}…` : value;
      parts.push(`${wanted}="${short.replace(/"/g, "'")}"`);
    }
  }
  return `<${parts.join(" ")}>`;
}
