/**
 * What a command implementation gets: a fenced CDP caller for its tab, the tab's refs and origin
 * policy, and a few tab helpers. Reads return a result; writes return a plan whose `act` performs
 * the one side-effecting CDP operation, so the runtime can persist `started` between the two.
 */
import type { CdpCaller } from "../cdp/cdpSession";
import type { NavigationWatch } from "../cdp/navigationWatch";
import type { RefTable, RefTarget } from "../cdp/refTable";
import type { OriginPolicy } from "../config/origins";
import { CommandError, StaleAuthorityError } from "../errors";
import { elementObject } from "./pageCall";
import type { SnapshotMemory } from "./snapshotMemory";
import type { BlockedNavigation, Capability, TabInfo, WritePreview, WriteResult } from "@understudy/protocol";

export interface CommandContext {
  readonly cdp: CdpCaller;
  readonly tabId: number;
  readonly refs: RefTable;
  /** The tab's latest snapshot, for `changesSince`. */
  readonly snapshots: SnapshotMemory;
  readonly policy: OriginPolicy;
  readonly capabilities: readonly Capability[];
  /** Absolute time (ms since the Unix epoch) by which the command must have answered. */
  readonly deadlineMs: number;
  now(): number;
  sleep(ms: number): Promise<void>;
  /** The session's own tab, fenced like CDP calls. */
  tab(): Promise<TabInfo>;
  /**
   * The tab's URL and title for a write's result, after its settle window: what the window's
   * page round trip read when nothing moved since, else `tab()` (SessionRuntime.context).
   */
  writtenTab(): Promise<Pick<TabInfo, "url" | "title">>;
  /** Brings the session's own tab to the front of its window. */
  activateTab(): Promise<void>;
  /** Starts recording main-frame navigation events (start it before acting, dispose after). */
  watchNavigation(): NavigationWatch;
  /** The stopped navigation whose block page the tab shows now, if any. */
  blockedPage(): BlockedNavigation | undefined;
  /** This command's resolved elements: backendNodeId -> remote object, per document (pageCall.ts). */
  readonly objects?: Map<number, { readonly objectId: string; readonly generation: number }>;
}

/** What a write reports beyond the tab afterwards (`select_text`: what it selected). */
export type WriteReport = Pick<WriteResult, "selection">;

/** A write, resolved and checked but not yet performed. */
export interface WritePlan {
  readonly preview: WritePreview;
  /** Performs the write: the one side-effecting CDP operation of this command. */
  act(): Promise<WriteReport | undefined | void>;
}

/**
 * Resolves a ref and checks that its node still exists in the document. The check is the node's
 * `DOM.resolveNode`, whose object the command's calls on the element then reuse (pageCall.ts).
 */
export async function resolveTarget(ctx: CommandContext, ref: string): Promise<RefTarget> {
  const target = ctx.refs.resolve(ref);
  try {
    await elementObject(ctx, target.backendNodeId);
  } catch (error) {
    if (error instanceof StaleAuthorityError) throw error;
    throw new CommandError("ref_not_found", `The element of ref ${ref} is gone from the page; take a new snapshot and use its refs.`);
  }
  return target;
}

/** The preview of a write that acts on a resolved element. */
export function elementPreview(target: RefTarget): WritePreview {
  return { targetRole: target.role, targetName: target.name, allowed: true };
}

/** Milliseconds left before the command's deadline, bounded by `capMs`. */
export function remainingMs(ctx: CommandContext, capMs: number): number {
  return Math.max(0, Math.min(capMs, ctx.deadlineMs - ctx.now()));
}
