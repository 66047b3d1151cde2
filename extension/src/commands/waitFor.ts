/**
 * `wait_for`: polls a text, URL or element-state condition every 100 ms until it holds or
 * `timeoutMs` passes (`matched: false`). When the command's own deadline cuts the wait short, it
 * fails with `wait_timeout` so the caller knows the full timeout did not run.
 */
import { WAIT_DEFAULT_TIMEOUT_MS, WAIT_POLL_INTERVAL_MS } from "../constants";
import { CommandError, StaleAuthorityError } from "../errors";
import type { ElementCondition, WaitCondition, WaitForCommand, WaitForResult } from "@understudy/protocol";
import { SETTLE_MAX_MS, STABILITY_FUNCTION, STABLE_FRAMES } from "./actionability";
import { type CommandContext, remainingMs } from "./context";
import { callOnElement } from "./pageCall";

const WAIT_MIN_TIMEOUT_MS = 100;
const WAIT_MAX_TIMEOUT_MS = 15_000;

/**
 * Whether a connected element is in `state` (`stable` is sampled separately, over frames).
 * Visible means what a person could see: a non-empty box, not `visibility: hidden`, and no
 * `display: none` or `content-visibility` ancestor hiding it (checkVisibility).
 */
const ELEMENT_STATE_FUNCTION = `function (state) {
  const el = this;
  if (!el.isConnected) return state === "hidden";
  const visible = () => {
    const r = el.getBoundingClientRect();
    if (r.width <= 0 || r.height <= 0) return false;
    if (typeof el.checkVisibility === "function") return el.checkVisibility({ visibilityProperty: true, opacityProperty: false });
    return getComputedStyle(el).visibility !== "hidden";
  };
  switch (state) {
    case "attached": return true;
    case "visible": return visible();
    case "hidden": return !visible();
    case "enabled": return !(el.matches(":disabled") || el.getAttribute("aria-disabled") === "true");
    default: return false;
  }
}`;

async function elementHolds(ctx: CommandContext, condition: ElementCondition, giveUpAt: number): Promise<boolean> {
  // Resolved on every poll: a ref of an older document fails stale_ref at once instead of waiting.
  const { backendNodeId } = ctx.refs.resolve(condition.ref);
  try {
    switch (condition.state) {
      case "stable": {
        const maxMs = remainingMs(ctx, Math.min(SETTLE_MAX_MS, Math.max(0, giveUpAt - ctx.now())));
        const status = await callOnElement(ctx, backendNodeId, STABILITY_FUNCTION, [maxMs, STABLE_FRAMES], { awaitPromise: true });
        // "unrendered": a hidden document paints no frames, so nothing on it moves either.
        return status === "stable" || status === "unrendered";
      }
      case "visible":
      case "hidden":
      case "enabled":
      case "attached":
        return (await callOnElement(ctx, backendNodeId, ELEMENT_STATE_FUNCTION, [condition.state])) === true;
      default: {
        const unreachable: never = condition.state;
        throw new CommandError("invalid_arguments", `${String(unreachable).slice(0, 32)} is not an element state; use visible, hidden, enabled, stable or attached.`);
      }
    }
  } catch (error) {
    if (error instanceof StaleAuthorityError) throw error;
    if (error instanceof CommandError && error.code === "invalid_arguments") throw error;
    // The node cannot be resolved any more (removed and collected): it is gone from the document.
    return condition.state === "hidden";
  }
}

async function holds(ctx: CommandContext, condition: WaitCondition, giveUpAt: number): Promise<boolean> {
  switch (condition.kind) {
    case "url_matches":
      return (await ctx.tab()).url.includes(condition.urlContains);
    case "text_appears":
    case "text_disappears": {
      const expression = `(() => { const b = document.body; return b ? b.innerText.includes(${JSON.stringify(condition.text)}) : false; })()`;
      const evaluated = await ctx.cdp.send<{ result?: { value?: unknown } }>("Runtime.evaluate", { expression, returnByValue: true });
      const present = evaluated.result?.value === true;
      return condition.kind === "text_appears" ? present : !present;
    }
    case "element_state":
      return elementHolds(ctx, condition, giveUpAt);
    default: {
      // Refused, not answered: returning the unknown condition itself would read as "matched".
      const unreachable: never = condition;
      throw new CommandError(
        "invalid_arguments",
        `${JSON.stringify(unreachable).slice(0, 64)} is not a wait condition this extension knows; use text_appears, text_disappears, url_matches or element_state, or update the extension.`,
      );
    }
  }
}

export async function waitFor(ctx: CommandContext, command: WaitForCommand): Promise<WaitForResult> {
  const timeoutMs = Math.max(WAIT_MIN_TIMEOUT_MS, Math.min(command.timeoutMs ?? WAIT_DEFAULT_TIMEOUT_MS, WAIT_MAX_TIMEOUT_MS));
  const started = ctx.now();
  const giveUpAt = started + timeoutMs;
  for (;;) {
    if (await holds(ctx, command.condition, giveUpAt)) return { name: "wait_for", matched: true, elapsedMs: ctx.now() - started };
    const now = ctx.now();
    if (now >= giveUpAt) return { name: "wait_for", matched: false, elapsedMs: now - started };
    if (now + WAIT_POLL_INTERVAL_MS >= ctx.deadlineMs) {
      throw new CommandError("wait_timeout", "The command deadline passed before the condition held; retry with a shorter timeoutMs.");
    }
    await ctx.sleep(Math.min(WAIT_POLL_INTERVAL_MS, giveUpAt - now));
  }
}
