/**
 * The CDP side of one controlled tab: the attachment, its guards and its document generations.
 * On set-up it sends the origin guard (Fetch) and the auto-attach pause ahead of the other calls,
 * turns on focus emulation (a click on a tab that is not in front otherwise stalls ~5 s on
 * Chromium 156), and learns the main frame. Events then drive the guards, bump the ref
 * generation on each new main-frame document, and surface JavaScript dialogs.
 */
import type { DebuggerApi } from "../chrome/facade";
import type { OriginPolicy } from "../config/origins";
import type { Logger } from "../log";
import { CdpSession } from "./cdpSession";
import { ORIGIN_GUARD_PATTERNS, decide, decisionCommand, isRequestPaused } from "./originGuard";
import { AUTO_ATTACH_PARAMS, autoAttachAction, isAttachedToTarget } from "./popupGuard";
import { SnapshotMemory } from "../commands/snapshotMemory";
import { RefTable } from "./refTable";

export interface DialogOpeningParams {
  readonly type: "alert" | "confirm" | "prompt" | "beforeunload";
  readonly message: string;
  readonly defaultPrompt?: string;
}

export interface ControlledTabHooks {
  onDialog(params: DialogOpeningParams): void;
  onNavigationBlocked(): void;
  onPopupClosed(): void;
  onNewDocument(generation: number): void;
}

interface FrameNavigatedParams {
  readonly frame?: { readonly id?: string; readonly parentId?: string };
  readonly type?: string;
}

const DIALOG_TYPES: ReadonlySet<string> = new Set(["alert", "confirm", "prompt", "beforeunload"]);

function isDialogOpening(params: unknown): params is DialogOpeningParams {
  if (typeof params !== "object" || params === null) return false;
  const p = params as { type?: unknown; message?: unknown };
  return typeof p.type === "string" && DIALOG_TYPES.has(p.type) && typeof p.message === "string";
}

export class ControlledTab {
  readonly cdp: CdpSession;
  readonly refs: RefTable;
  /** The latest snapshot of this tab, for `changesSince`. */
  readonly snapshots = new SnapshotMemory();
  private mainFrameId: string | undefined;

  constructor(
    api: DebuggerApi,
    readonly tabId: number,
    generation: number,
    private policy: OriginPolicy,
    private readonly hooks: ControlledTabHooks,
    private readonly log: Logger,
  ) {
    this.cdp = new CdpSession(api, tabId);
    this.refs = new RefTable(generation);
  }

  /** Attaches the debugger; throws when Chrome refuses the attachment. `setUp` follows. */
  async attach(): Promise<void> {
    await this.cdp.attach();
  }

  /**
   * Installs the guards, turns on the page events and focus emulation, and learns the main frame.
   * None of these calls needs another's answer, so all are sent at once, the guards first. The
   * caller uses the tab only after every call answered, so from then on no main-frame document
   * request and no related target runs unchecked, as when each call waited for the one before;
   * none of the other calls starts a request or a target. Resolves once every call answered;
   * rejects, once all settled, with the first failure in the order above.
   */
  async setUp(): Promise<void> {
    const calls: readonly (readonly [string, object])[] = [
      ["Fetch.enable", { patterns: ORIGIN_GUARD_PATTERNS }],
      ["Target.setAutoAttach", AUTO_ATTACH_PARAMS],
      ["Page.enable", {}],
      ["Page.setLifecycleEventsEnabled", { enabled: true }],
      ["Emulation.setFocusEmulationEnabled", { enabled: true }],
      ["Page.getFrameTree", {}],
    ];
    const answers = await Promise.allSettled(calls.map(([method, params]) => this.cdp.sendUnchecked(method, params)));
    const failure = answers.find((answer) => answer.status === "rejected");
    if (failure !== undefined) throw failure.reason;
    const tree = answers.at(-1);
    const frameTree = tree?.status === "fulfilled" ? (tree.value as { frameTree?: { frame?: { id?: string } } }).frameTree : undefined;
    this.mainFrameId = frameTree?.frame?.id;
  }

  setPolicy(policy: OriginPolicy): void {
    this.policy = policy;
  }

  detach(): Promise<void> {
    return this.cdp.detach();
  }

  /** Handles one CDP event of this tab (root or child session). */
  handleEvent(method: string, params: unknown, sessionId: string | undefined): void {
    switch (method) {
      case "Fetch.requestPaused":
        if (sessionId === undefined && isRequestPaused(params)) this.answerPausedRequest(params.requestId, decide(params, this.policy, this.mainFrameId));
        break;
      case "Target.attachedToTarget":
        if (isAttachedToTarget(params)) this.releaseTarget(params.sessionId, params.targetInfo.targetId, autoAttachAction(params));
        break;
      case "Page.frameNavigated": {
        const frame = (params as FrameNavigatedParams).frame;
        if (sessionId === undefined && frame !== undefined && frame.parentId === undefined) {
          this.mainFrameId = frame.id ?? this.mainFrameId;
          this.refs.newDocument();
          this.hooks.onNewDocument(this.refs.generation);
        }
        break;
      }
      case "Page.javascriptDialogOpening":
        if (sessionId === undefined && isDialogOpening(params)) this.hooks.onDialog(params);
        break;
      default:
        break;
    }
    this.cdp.dispatch(method, params, sessionId);
  }

  private answerPausedRequest(requestId: string, decision: "continue" | "block"): void {
    if (decision === "block") this.hooks.onNavigationBlocked();
    const { method, params } = decisionCommand(decision, requestId);
    this.cdp.sendUnchecked(method, params).catch(() => {
      this.log.warn("origin_guard_answer_failed", { decision });
    });
  }

  private releaseTarget(sessionId: string, targetId: string, action: "close" | "resume"): void {
    const answer =
      action === "close"
        ? this.cdp.sendUnchecked("Target.closeTarget", { targetId })
        : this.cdp.sendUnchecked("Runtime.runIfWaitingForDebugger", {}, sessionId);
    if (action === "close") this.hooks.onPopupClosed();
    answer.catch(() => {
      this.log.warn("auto_attach_answer_failed", { action });
    });
  }
}
