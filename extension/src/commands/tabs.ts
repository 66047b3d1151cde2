/**
 * `hello`, `get_tabs`, `switch_tab`: each exposes only the session's own tab. No other tab of the
 * profile is ever listed, activated or even looked up.
 */
import { SESSION_PROTOCOL_VERSION } from "../constants";
import { CommandError } from "../errors";
import type { GetTabsResult, HelloResult, SwitchTabCommand } from "@understudy/protocol";
import type { CommandContext, WritePlan } from "./context";

export async function hello(ctx: CommandContext): Promise<HelloResult> {
  return { name: "hello", protocolVersion: SESSION_PROTOCOL_VERSION, capabilities: [...ctx.capabilities], tab: await ctx.tab() };
}

export async function getTabs(ctx: CommandContext): Promise<GetTabsResult> {
  return { name: "get_tabs", tabs: [await ctx.tab()] };
}

export function planSwitchTab(ctx: CommandContext, command: SwitchTabCommand, dryRun: boolean): WritePlan {
  const owned = command.tabId === ctx.tabId;
  if (!owned && !dryRun) {
    throw new CommandError("tab_not_owned", `This session controls only tab ${ctx.tabId}; get_tabs lists it.`);
  }
  return { preview: { allowed: owned }, act: () => ctx.activateTab() };
}
