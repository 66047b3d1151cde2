/**
 * Calls a function on one element of the page (DOM.resolveNode, once per node and command, then
 * Runtime.callFunctionOn), with its arguments passed as CDP call arguments, never spliced into
 * script text.
 */
import { CommandError } from "../errors";
import type { CommandContext } from "./context";

export interface CallOptions {
  /** Wait for the promise the function returns and answer its value. */
  readonly awaitPromise?: boolean;
  /** Remote objects (of the element's JavaScript world) passed after the plain arguments. */
  readonly objectArguments?: readonly string[];
}

/**
 * The element's remote object for `Runtime.callFunctionOn`. One command resolves a node once
 * (`DOM.resolveNode`) and reuses the object for its later calls on that node, while the tab shows
 * the same document: a click's existence check, stability wait and hit test are one resolve, not
 * three. The cache lives in the command's context, so no command sees another's objects.
 */
export async function elementObject(ctx: CommandContext, backendNodeId: number): Promise<string> {
  const generation = ctx.refs.generation;
  const cached = ctx.objects?.get(backendNodeId);
  if (cached !== undefined && cached.generation === generation) return cached.objectId;
  const resolved = await ctx.cdp.send<{ object?: { objectId?: string } }>("DOM.resolveNode", { backendNodeId });
  const objectId = resolved.object?.objectId;
  if (objectId === undefined) {
    throw new CommandError("element_not_interactable", "The element cannot be reached from script; take a new snapshot.");
  }
  ctx.objects?.set(backendNodeId, { objectId, generation });
  return objectId;
}

/** Runs `functionDeclaration` with `this` bound to the element; returns its value by value. */
export async function callOnElement(
  ctx: CommandContext,
  backendNodeId: number,
  functionDeclaration: string,
  args: readonly unknown[],
  options: CallOptions = {},
): Promise<unknown> {
  const objectId = await elementObject(ctx, backendNodeId);
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
