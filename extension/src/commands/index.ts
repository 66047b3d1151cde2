/**
 * Command dispatch over the whole catalog. Both switches end in a `never` default, so a command
 * added to the spec does not compile until it is implemented here.
 */
import { CommandError } from "../errors";
import type { Command, CommandResult } from "@understudy/protocol";
import type { CommandContext, WritePlan } from "./context";
import { planDrag } from "./drag";
import { planFill, planFillSecret, planFocus, planPressKey, planSelectOption, planSetChecked, planType } from "./input";
import { planGoBack, planGoForward, planNavigate, planReload } from "./navigation";
import { planClick, planHover, planScroll } from "./pointer";
import { screenshot } from "./screenshot";
import { planSelectText } from "./selectText";
import { snapshot } from "./snapshot";
import { getTabs, hello, planSwitchTab } from "./tabs";
import { waitFor } from "./waitFor";

function notA(kind: "read" | "write", name: string): CommandError {
  return new CommandError(
    "invalid_arguments",
    kind === "read" ? `${name} is a write; submit it through the write protocol.` : `${name} is a read; submit it as a read.`,
  );
}

/** Runs a read command. */
export function runRead(ctx: CommandContext, command: Command): Promise<CommandResult> {
  switch (command.name) {
    case "hello":
      return hello(ctx);
    case "get_tabs":
      return getTabs(ctx);
    case "snapshot":
      return snapshot(ctx, command);
    case "screenshot":
      return screenshot(ctx, command);
    case "wait_for":
      return waitFor(ctx, command);
    case "navigate":
    case "go_back":
    case "go_forward":
    case "reload":
    case "click":
    case "hover":
    case "drag":
    case "focus":
    case "select_text":
    case "type":
    case "fill":
    case "fill_secret":
    case "press_key":
    case "select_option":
    case "set_checked":
    case "scroll":
    case "switch_tab":
      return Promise.reject(notA("read", command.name));
    default: {
      const unreachable: never = command;
      return Promise.reject(new CommandError("invalid_arguments", `Unknown command ${String(unreachable)}.`));
    }
  }
}

/**
 * Resolves and checks a write without acting. `secretValue` is the grant's in-memory plaintext
 * for `fill_secret` (absent in a dry run), and is ignored by every other command.
 */
export async function planWrite(ctx: CommandContext, command: Command, dryRun: boolean, secretValue: string | undefined): Promise<WritePlan> {
  switch (command.name) {
    case "navigate":
      return planNavigate(ctx, command);
    case "go_back":
      return planGoBack(ctx, command);
    case "go_forward":
      return planGoForward(ctx, command);
    case "reload":
      return planReload(ctx, command);
    case "click":
      return planClick(ctx, command, dryRun);
    case "hover":
      return planHover(ctx, command);
    case "drag":
      return planDrag(ctx, command, dryRun);
    case "focus":
      return planFocus(ctx, command);
    case "select_text":
      return planSelectText(ctx, command, dryRun);
    case "type":
      return planType(ctx, command);
    case "fill":
      return planFill(ctx, command, dryRun);
    case "fill_secret":
      return planFillSecret(ctx, command, dryRun, secretValue);
    case "press_key":
      return planPressKey(ctx, command);
    case "select_option":
      return planSelectOption(ctx, command);
    case "set_checked":
      return planSetChecked(ctx, command);
    case "scroll":
      return planScroll(ctx, command);
    case "switch_tab":
      return planSwitchTab(ctx, command, dryRun);
    case "hello":
    case "get_tabs":
    case "snapshot":
    case "screenshot":
    case "wait_for":
      throw notA("write", command.name);
    default: {
      const unreachable: never = command;
      throw new CommandError("invalid_arguments", `Unknown command ${String(unreachable)}.`);
    }
  }
}
