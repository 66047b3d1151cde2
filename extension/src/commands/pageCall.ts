/**
 * Calls a function on one element of the page (DOM.resolveNode + Runtime.callFunctionOn), with
 * its arguments passed as CDP call arguments, never spliced into script text.
 */
import { CommandError } from "../errors";
import type { CommandContext } from "./context";

export interface CallOptions {
  /** Wait for the promise the function returns and answer its value. */
  readonly awaitPromise?: boolean;
  /** Remote objects (of the element's JavaScript world) passed after the plain arguments. */
  readonly objectArguments?: readonly string[];
}

/** Runs `functionDeclaration` with `this` bound to the element; returns its value by value. */
export async function callOnElement(
  ctx: CommandContext,
  backendNodeId: number,
  functionDeclaration: string,
  args: readonly unknown[],
  options: CallOptions = {},
): Promise<unknown> {
  const resolved = await ctx.cdp.send<{ object?: { objectId?: string } }>("DOM.resolveNode", { backendNodeId });
  const objectId = resolved.object?.objectId;
  if (objectId === undefined) {
    throw new CommandError("element_not_interactable", "The element cannot be reached from script; take a new snapshot.");
  }
  const response = await ctx.cdp.send<{ result?: { value?: unknown }; exceptionDetails?: unknown }>("Runtime.callFunctionOn", {
    objectId,
    functionDeclaration,
    arguments: [...args.map((value) => ({ value })), ...(options.objectArguments ?? []).map((id) => ({ objectId: id }))],
    returnByValue: true,
    ...(options.awaitPromise === true ? { awaitPromise: true } : {}),
  });
  if (response.exceptionDetails !== undefined) {
    throw new CommandError("element_not_interactable", "The page rejected the call on this element; take a new snapshot and check the element.");
  }
  return response.result?.value;
}
