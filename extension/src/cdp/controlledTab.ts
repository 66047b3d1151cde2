/**
 * The CDP side of one controlled tab: the attachment, its guards and its document generations.
 * On set-up it sends the origin guard (Fetch) and the auto-attach pause ahead of the other calls,
 * turns on focus emulation (a click on a tab that is not in front otherwise stalls ~5 s on
 * Chromium 156), and learns the main frame. Events then drive the guards, bump the ref
 * generation on each new main-frame document, and surface JavaScript dialogs. For each main-frame
 * request the origin guard stops it works out what the page did (`Page.frameRequestedNavigation`
 * names renderer-initiated navigations; a pause after one was let through is a server redirect).
 */
import type { DebuggerApi } from "../chrome/facade";
import type { OriginPolicy } from "../config/origins";
import type { NavigationBlockCause } from "@understudy/protocol";
import type { Logger } from "../log";
import { CdpSession } from "./cdpSession";
import { ORIGIN_GUARD_PATTERNS, type RequestPausedParams, decide, decisionCommand, isRequestPaused } from "./originGuard";
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
  onNavigationBlocked(url: string, cause: NavigationBlockCause): void;
  onPopupClosed(): void;
  /**
   * A document of this tab (its page or a frame) is about to load from, or shows, `url`; the
   * request the guard holds continues once the returned promise settles (the popup fence admits
   * the host first, see popupFence.ts).
   */
  admitDocument(url: string): Promise<void>;
  /** A main-frame document committed; `isErrorPage` for an error page (the block page is one). */
  onNewDocument(generation: number, isErrorPage: boolean): void;
}

interface FrameNavigatedParams {
  readonly frame?: { readonly id?: string; readonly parentId?: string; readonly url?: string; readonly urlFragment?: string; readonly unreachableUrl?: string };
  readonly type?: string;
}

/** A main-frame URL as CDP reported it: `Frame.url` has no fragment, `urlFragment` carries it. */
function frameUrl(frame: { readonly url?: string; readonly urlFragment?: string }): string | undefined {
  return typeof frame.url === "string" ? frame.url + (frame.urlFragment ?? "") : undefined;
}

/** The main frame's document as CDP last reported it (see `ControlledTab.mainDocument`). */
export interface MainDocument {
  /** Its URL, fragment included; undefined until CDP named one. */
  readonly url: string | undefined;
  /** An error page (Chromium's block page is one): `url` is then not what the tab shows. */
  readonly errorPage: boolean;
  /** Counts every main-frame commit and same-document navigation. */
  readonly version: number;
}

interface FrameRequestedNavigationParams {
  readonly frameId?: string;
  readonly reason?: string;
  readonly url?: string;
  /** `currentTab`, or where a new tab or window would open (a popup, not this frame's navigation). */
  readonly disposition?: string;
}

/** `Page.frameRequestedNavigation` reasons (ClientNavigationReason) to what the page did. */
const CAUSE_BY_REASON: Readonly<Record<string, NavigationBlockCause>> = {
  anchorClick: "link",
  formSubmissionGet: "form_get",
  formSubmissionPost: "form_post",
  httpHeaderRefresh: "meta_refresh",
  metaTagRefresh: "meta_refresh",
  scriptInitiated: "script",
  reload: "reload",
};

/** What made a main-frame request that the guard stopped. */
export function blockCause(
  url: string,
  requested: { readonly url: string; readonly reason: string } | undefined,
  redirected: boolean,
): NavigationBlockCause {
  if (redirected) return "redirect";
  if (requested !== undefined && requested.url === url) return CAUSE_BY_REASON[requested.reason] ?? "other";
  return "other";
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
  /** The main frame's latest renderer-initiated navigation request, until a document commits. */
  private requested: { url: string; reason: string } | undefined;
  /** A main-frame document request was let through and no document committed since. */
  private continuedMainFrame = false;
  /** Counts the signs that the page is opening a window or navigating (see `reactions`). */
  private reactionCount = 0;
  /** Child sessions of out-of-process frames: their own windows and navigations report there. */
  private readonly outOfProcessFrames = new Set<string>();
  /** See `mainDocument`. */
  private main: MainDocument = { url: undefined, errorPage: false, version: 0 };
  /** Waiting in `navigationDecided`, woken by the event that ends the navigation in flight. */
  private readonly decidedWaiters = new Set<() => void>();

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
    const frameTree = tree?.status === "fulfilled" ? (tree.value as { frameTree?: { frame?: { id?: string; url?: string; urlFragment?: string; unreachableUrl?: string } } }).frameTree : undefined;
    this.mainFrameId = frameTree?.frame?.id;
    // Unless an event already reported a newer document.
    if (this.main.version === 0 && frameTree?.frame !== undefined) {
      this.main = { url: frameUrl(frameTree.frame), errorPage: frameTree.frame.unreachableUrl !== undefined, version: 0 };
    }
  }

  /**
   * The main frame's document as the page's own CDP events reported it (`Page.frameNavigated`,
   * `Page.navigatedWithinDocument`): what page script cannot fake. A write's result takes the URL
   * the page reports only when it is this one and nothing moved since (SessionRuntime.writtenTab).
   */
  get mainDocument(): MainDocument {
    return this.main;
  }

  /**
   * How many signs the page gave so far that it opens a window or navigates: `Page.windowOpen`
   * (Blink reports every new window there, `noopener` ones included, while the handler that
   * opens it runs), `Page.frameRequestedNavigation` (in any disposition: a modifier click opens a
   * tab without a `windowOpen`), a frame that started loading, a document request the guard
   * held, a target attached, and the popups Chrome's tab events report (`noteReaction`). A write's
   * settle window compares the count before and after it acted (SessionRuntime.settleWindow).
   */
  get reactions(): number {
    return this.reactionCount;
  }

  /** A sign of a reaction reported outside CDP (a popup's tab event). */
  noteReaction(): void {
    this.reactionCount += 1;
  }

  /**
   * Whether the tab holds a frame of another process: its windows and navigations are reported
   * on that frame's own session, where the Page domain is off, so no count covers them.
   */
  get hasOutOfProcessFrames(): boolean {
    return this.outOfProcessFrames.size > 0;
  }

  setPolicy(policy: OriginPolicy): void {
    this.policy = policy;
  }

  detach(): Promise<void> {
    // No event ends a wait on a detached tab.
    this.wakeDecided();
    return this.cdp.detach();
  }

  /** Handles one CDP event of this tab (root or child session). */
  handleEvent(method: string, params: unknown, sessionId: string | undefined): void {
    switch (method) {
      case "Fetch.requestPaused":
        if (sessionId === undefined && isRequestPaused(params)) this.onRequestPaused(params);
        break;
      case "Page.windowOpen":
      case "Page.frameStartedLoading":
        this.reactionCount += 1;
        break;
      case "Target.detachedFromTarget": {
        const child = (params as { sessionId?: unknown }).sessionId;
        if (typeof child === "string") this.outOfProcessFrames.delete(child);
        break;
      }
      case "Page.frameRequestedNavigation": {
        this.reactionCount += 1;
        const requested = params as FrameRequestedNavigationParams;
        const isMain = requested.frameId === undefined || this.mainFrameId === undefined || requested.frameId === this.mainFrameId;
        const inThisTab = requested.disposition === undefined || requested.disposition === "currentTab";
        if (sessionId === undefined && isMain && inThisTab && typeof requested.url === "string") {
          this.requested = { url: requested.url, reason: requested.reason ?? "other" };
          this.continuedMainFrame = false;
        }
        break;
      }
      case "Target.attachedToTarget":
        this.reactionCount += 1;
        if (isAttachedToTarget(params)) {
          if (params.targetInfo.type === "iframe") this.outOfProcessFrames.add(params.sessionId);
          // An out-of-process frame: its origin joins the fence before it is released (its
          // document request may not have paused here).
          const url = (params.targetInfo as { url?: unknown }).url;
          const admitted = typeof url === "string" ? this.hooks.admitDocument(url) : Promise.resolve();
          const { sessionId: child, targetInfo } = params;
          const action = autoAttachAction(params);
          admitted.finally(() => {
            this.releaseTarget(child, targetInfo.targetId, action);
          }).catch(() => undefined);
        }
        break;
      case "Page.frameNavigated": {
        const frame = (params as FrameNavigatedParams).frame;
        if (typeof frame?.url === "string") this.hooks.admitDocument(frame.url).catch(() => undefined);
        if (sessionId === undefined && frame !== undefined && frame.parentId === undefined) {
          this.main = { url: frameUrl(frame), errorPage: frame.unreachableUrl !== undefined, version: this.main.version + 1 };
          this.mainFrameId = frame.id ?? this.mainFrameId;
          this.requested = undefined;
          this.continuedMainFrame = false;
          this.refs.newDocument();
          this.hooks.onNewDocument(this.refs.generation, frame.unreachableUrl !== undefined);
        }
        break;
      }
      case "Page.navigatedWithinDocument": {
        const within = params as { frameId?: string; url?: string };
        const isMain = within.frameId === undefined || this.mainFrameId === undefined || within.frameId === this.mainFrameId;
        if (sessionId === undefined && isMain) {
          this.main = { url: typeof within.url === "string" ? within.url : undefined, errorPage: this.main.errorPage, version: this.main.version + 1 };
        }
        break;
      }
      case "Page.frameStoppedLoading": {
        // A requested navigation that never commits (a download, a 204) ends here; without this
        // every later write would wait out the settle window's cap.
        const stopped = (params as { frameId?: string }).frameId;
        if (sessionId === undefined && stopped !== undefined && stopped === this.mainFrameId) {
          this.requested = undefined;
          this.continuedMainFrame = false;
        }
        break;
      }
      case "Page.javascriptDialogOpening":
        if (sessionId === undefined && isDialogOpening(params)) this.hooks.onDialog(params);
        break;
      default:
        break;
    }
    if (this.decidedWaiters.size > 0 && !this.navigationInFlight) this.wakeDecided();
    this.cdp.dispatch(method, params, sessionId);
  }

  /**
   * Whether a main-frame navigation may still be on its way: requested by the page or let
   * through by the guard, with no document committed since. A command's settle window waits
   * for it, bounded.
   */
  get navigationInFlight(): boolean {
    return this.requested !== undefined || this.continuedMainFrame;
  }

  /**
   * Resolves once no main-frame navigation is in flight: at once when none is, otherwise on the
   * event that ends it (a document committed, the guard stopped the request, the frame stopped
   * loading), on detach, or after `timeoutMs`.
   */
  navigationDecided(timeoutMs: number): Promise<void> {
    if (!this.navigationInFlight || timeoutMs <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.decidedWaiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      this.decidedWaiters.add(done);
    });
  }

  private wakeDecided(): void {
    for (const done of [...this.decidedWaiters]) done();
  }

  private onRequestPaused(params: RequestPausedParams): void {
    this.reactionCount += 1;
    const decision = decide(params, this.policy, this.mainFrameId);
    const isMainFrameDocument = (params.resourceType === undefined || params.resourceType === "Document") && (params.frameId === undefined || this.mainFrameId === undefined || params.frameId === this.mainFrameId);
    if (decision === "block") {
      const redirected = params.redirectedRequestId !== undefined || (this.continuedMainFrame && this.requested?.url !== params.request.url);
      this.hooks.onNavigationBlocked(params.request.url, blockCause(params.request.url, this.requested, redirected));
      this.requested = undefined;
      this.continuedMainFrame = false;
      this.answerPausedRequest(params.requestId, decision);
      return;
    }
    if (isMainFrameDocument) this.continuedMainFrame = true;
    const isDocument = params.resourceType === undefined || params.resourceType === "Document";
    if (!isDocument) {
      this.answerPausedRequest(params.requestId, decision);
      return;
    }
    this.hooks
      .admitDocument(params.request.url)
      .catch(() => undefined)
      .finally(() => {
        this.answerPausedRequest(params.requestId, decision);
      });
  }

  private answerPausedRequest(requestId: string, decision: "continue" | "block"): void {
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
