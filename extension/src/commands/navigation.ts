/**
 * `navigate`, `go_back`, `go_forward`, `reload`. Every target URL is prechecked against the
 * session's origin policy; the Fetch origin guard enforces it again for the request itself (and
 * for redirects). History entries are prechecked too, because a back-forward-cache restore issues
 * no request the guard could stop.
 */
import { NAVIGATION_LOAD_TIMEOUT_MS } from "../constants";
import { CommandError } from "../errors";
import type { GoBackCommand, GoForwardCommand, NavigateCommand, ReloadCommand } from "@understudy/protocol";
import { type CommandContext, type WritePlan, remainingMs } from "./context";

interface NavigateResponse {
  readonly loaderId?: string;
  readonly errorText?: string;
}

interface NavigationHistory {
  readonly currentIndex: number;
  readonly entries: readonly { readonly id: number; readonly url: string }[];
}

const BLOCKED_BY_CLIENT = "net::ERR_BLOCKED_BY_CLIENT";

function navigationError(errorText: string): CommandError {
  if (errorText === BLOCKED_BY_CLIENT) {
    return new CommandError(
      "origin_not_allowed",
      "The navigation was redirected to an origin this session does not allow; it was stopped before any request was sent.",
    );
  }
  return new CommandError("navigation_failed", `The navigation failed (${errorText.slice(0, 100)}); check the URL and retry.`);
}

/**
 * Runs a navigation step and waits, bounded, for the new document to load. `Page.navigate`
 * answers with the new document's loaderId, or none for a same-document navigation; history
 * steps and reloads answer nothing, so the wait takes the first document committed after them.
 */
async function navigateAndWait(ctx: CommandContext, step: () => Promise<NavigateResponse | "unknown_loader">): Promise<void> {
  const watch = ctx.watchNavigation();
  try {
    const response = await step();
    if (response === "unknown_loader") {
      await watch.settled(undefined, remainingMs(ctx, NAVIGATION_LOAD_TIMEOUT_MS));
      return;
    }
    if (response.errorText !== undefined && response.errorText !== "") throw navigationError(response.errorText);
    if (response.loaderId === undefined) return;
    await watch.settled(response.loaderId, remainingMs(ctx, NAVIGATION_LOAD_TIMEOUT_MS));
  } finally {
    watch.dispose();
  }
}

export function planNavigate(ctx: CommandContext, command: NavigateCommand): WritePlan {
  let url: string;
  try {
    url = new URL(command.url).toString();
  } catch {
    throw new CommandError("invalid_arguments", "The url is not an absolute URL; pass one such as https://example.com/login.");
  }
  const allowed = ctx.policy.allowsUrl(url);
  return {
    preview: { navigatesTo: url, allowed },
    act: () => navigateAndWait(ctx, () => ctx.cdp.send<NavigateResponse>("Page.navigate", { url })),
  };
}

async function planHistory(ctx: CommandContext, delta: -1 | 1): Promise<WritePlan> {
  const history = await ctx.cdp.send<NavigationHistory>("Page.getNavigationHistory", {});
  const entry = history.entries[history.currentIndex + delta];
  if (entry === undefined) {
    throw new CommandError("no_history", `There is no history entry to go ${delta < 0 ? "back" : "forward"} to; use navigate instead.`);
  }
  return {
    preview: { navigatesTo: entry.url, allowed: ctx.policy.allowsUrl(entry.url) },
    act: () =>
      navigateAndWait(ctx, async () => {
        await ctx.cdp.send("Page.navigateToHistoryEntry", { entryId: entry.id });
        return "unknown_loader";
      }),
  };
}

export function planGoBack(ctx: CommandContext, _command: GoBackCommand): Promise<WritePlan> {
  return planHistory(ctx, -1);
}

export function planGoForward(ctx: CommandContext, _command: GoForwardCommand): Promise<WritePlan> {
  return planHistory(ctx, 1);
}

export async function planReload(ctx: CommandContext, _command: ReloadCommand): Promise<WritePlan> {
  const tab = await ctx.tab();
  return {
    preview: { navigatesTo: tab.url, allowed: ctx.policy.allowsUrl(tab.url) },
    act: () =>
      navigateAndWait(ctx, async () => {
        await ctx.cdp.send("Page.reload", {});
        return "unknown_loader";
      }),
  };
}
