/**
 * `wait_for`: polls a text or URL condition every 100 ms until it holds or `timeoutMs` passes
 * (`matched: false`). When the command's own deadline cuts the wait short, it fails with
 * `wait_timeout` so the caller knows the full timeout did not run.
 */
import { WAIT_DEFAULT_TIMEOUT_MS, WAIT_POLL_INTERVAL_MS } from "../constants";
import { CommandError } from "../errors";
import type { WaitCondition, WaitForCommand, WaitForResult } from "../generated/wire";
import type { CommandContext } from "./context";

const WAIT_MIN_TIMEOUT_MS = 100;
const WAIT_MAX_TIMEOUT_MS = 15_000;

async function holds(ctx: CommandContext, condition: WaitCondition): Promise<boolean> {
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
    default: {
      const unreachable: never = condition;
      return unreachable;
    }
  }
}

export async function waitFor(ctx: CommandContext, command: WaitForCommand): Promise<WaitForResult> {
  const timeoutMs = Math.max(WAIT_MIN_TIMEOUT_MS, Math.min(command.timeoutMs ?? WAIT_DEFAULT_TIMEOUT_MS, WAIT_MAX_TIMEOUT_MS));
  const started = ctx.now();
  const giveUpAt = started + timeoutMs;
  for (;;) {
    if (await holds(ctx, command.condition)) return { name: "wait_for", matched: true, elapsedMs: ctx.now() - started };
    const now = ctx.now();
    if (now >= giveUpAt) return { name: "wait_for", matched: false, elapsedMs: now - started };
    if (now + WAIT_POLL_INTERVAL_MS >= ctx.deadlineMs) {
      throw new CommandError("wait_timeout", "The command deadline passed before the condition held; retry with a shorter timeoutMs.");
    }
    await ctx.sleep(Math.min(WAIT_POLL_INTERVAL_MS, giveUpAt - now));
  }
}
