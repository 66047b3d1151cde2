/**
 * Popup containment. A tab or window opened by a controlled tab is closed as soon as Chrome
 * reports it (`tabs.onCreated` with `openerTabId`), before its first request executes; measured
 * on Chromium 156, `Target.setAutoAttach` does not catch `window.open` popups, so this listener
 * is the primary control. Targets that auto-attach paused (`waitForDebuggerOnStart`) are resumed
 * unless they are pages opened by the controlled tab, which are closed instead.
 */
import type { TabSnapshot } from "../chrome/facade";

/** Auto-attach related targets and hold each until the guard released it. */
export const AUTO_ATTACH_PARAMS = { autoAttach: true, waitForDebuggerOnStart: true, flatten: true } as const;

/** Whether a newly created tab is a popup of a controlled tab and must be closed. */
export function isControlledPopup(tab: TabSnapshot, isControlledTab: (tabId: number) => boolean): boolean {
  return tab.openerTabId !== undefined && tab.openerTabId !== tab.id && isControlledTab(tab.openerTabId);
}

export interface AttachedToTargetParams {
  readonly sessionId: string;
  readonly targetInfo: { readonly targetId: string; readonly type: string; readonly openerId?: string };
  readonly waitingForDebugger?: boolean;
}

export function isAttachedToTarget(params: unknown): params is AttachedToTargetParams {
  if (typeof params !== "object" || params === null) return false;
  const p = params as { sessionId?: unknown; targetInfo?: { targetId?: unknown; type?: unknown } };
  return typeof p.sessionId === "string" && typeof p.targetInfo?.targetId === "string" && typeof p.targetInfo.type === "string";
}

/** What to do with an auto-attached target: close an opened page, resume anything else. */
export function autoAttachAction(params: AttachedToTargetParams): "close" | "resume" {
  return params.targetInfo.type === "page" && params.targetInfo.openerId !== undefined ? "close" : "resume";
}
