/**
 * Waits for a main-frame navigation to finish loading. Matching on the navigation's loaderId
 * (from `Page.lifecycleEvent` "load") rather than on the next `Page.loadEventFired` matters: the
 * error page of an earlier, blocked navigation can fire its load event after the next command
 * started, and would otherwise end the wait before the new document exists.
 *
 * For a navigation whose new document is known (`Page.navigate` answered its loaderId, so the
 * document has committed), the wait also makes the settle window's round trip through the page's
 * task queue (SessionRuntime.settleWindow) inside the new document while it loads: one evaluation
 * sent at once, answering after the document's `load` and two zero-delay tasks after it. Made
 * after Chromium reported `load` instead, the round trip waited 11-17 ms on this machine's
 * Chromium 156: the renderer answers nothing right after `load` until it has drawn the loaded
 * page, while a task queued from the page's own `load` listener runs before that.
 */
import { BLOCK_SETTLE_PAGE_MS } from "../constants";
import type { CdpSession } from "./cdpSession";

interface FrameNavigated {
  readonly frame?: { readonly parentId?: string; readonly loaderId?: string };
  readonly type?: string;
}

interface LifecycleEvent {
  readonly loaderId?: string;
  readonly name?: string;
}

/**
 * Answers the `performance.timeOrigin` of the document it ran in, with its URL and title as the
 * page shows them then (`PageSeen`), once that document has fired `load` and two zero-delay tasks
 * queued after it ran. Zero-delay tasks the page scheduled while handling `load` (a script
 * redirect, a meta refresh, which Chromium starts once `load` was handled) are queued before the
 * second one, whatever the order of the `load` listeners; so they have run, and what they asked
 * for was reported on the debugger session, before the answer.
 */
export const LOADED_TASK_EXPRESSION = `new Promise((resolve) => {
  const answer = () => resolve({ timeOrigin: performance.timeOrigin, href: location.href, title: document.title });
  const after = () => setTimeout(() => setTimeout(answer, 0), 0);
  if (document.readyState === "complete") after();
  else addEventListener("load", after, { once: true });
})`;

/**
 * How far the new document's time origin may lie before the moment the watch started and still
 * count as that navigation's document: the page's and the worker's clocks come from different
 * processes. The document that navigation replaced started loading before the previous command.
 */
const TIME_ORIGIN_TOLERANCE_MS = 5;

/**
 * What a settle round trip read in the page: `location.href` and `document.title`. The page
 * controls its title anyway; its URL is taken only where it matches what CDP reported
 * (SessionRuntime.writtenTab).
 */
export interface PageSeen {
  readonly href: string;
  readonly title: string;
}

/** The `PageSeen` in an evaluation's answer, if it carries one. */
export function pageSeenOf(value: unknown): PageSeen | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const { href, title } = value as { href?: unknown; title?: unknown };
  return typeof href === "string" && typeof title === "string" ? { href, title } : undefined;
}

export interface NavigationWatchOptions {
  /**
   * Called once the new document ran the settle window's page round trip, after its `load`, with
   * what it read there: the runtime then does not make its own (SessionRuntime.settleWindow).
   */
  readonly onPageSettled?: (seen: PageSeen | undefined) => void;
  /** Wall-clock milliseconds comparable with a page's `performance.timeOrigin`. */
  readonly wallClock?: () => number;
}

function workerWallClock(): number {
  return performance.timeOrigin + performance.now();
}

export class NavigationWatch {
  private readonly loaded = new Set<string>();
  private readonly committed: string[] = [];
  private settledOtherwise = false;
  private wake: (() => void) | undefined;
  private readonly unsubscribe: () => void;
  private readonly startedAt: number;

  constructor(
    private readonly cdp: CdpSession,
    private readonly options: NavigationWatchOptions = {},
  ) {
    this.startedAt = (options.wallClock ?? workerWallClock)();
    this.unsubscribe = cdp.on((method, params, sessionId) => {
      if (sessionId !== undefined) return;
      if (method === "Page.lifecycleEvent") {
        const event = params as LifecycleEvent;
        if (event.name === "load" && event.loaderId !== undefined) this.loaded.add(event.loaderId);
      } else if (method === "Page.frameNavigated") {
        const event = params as FrameNavigated;
        if (event.frame?.parentId !== undefined) return;
        if (event.frame?.loaderId !== undefined) this.committed.push(event.frame.loaderId);
        // A back-forward-cache restore shows a document that already loaded: nothing more comes.
        if (event.type === "BackForwardCacheRestore") this.settledOtherwise = true;
      } else if (method === "Page.navigatedWithinDocument") {
        this.settledOtherwise = true;
      } else {
        return;
      }
      this.wake?.();
    });
  }

  /**
   * Resolves true once the navigation with `loaderId` loaded (or, without a loaderId, once any
   * main-frame document committed after the watch started has loaded); false after `timeoutMs`.
   *
   * With a loaderId (call it as soon as `Page.navigate` answered it), it also waits, at most
   * `BLOCK_SETTLE_PAGE_MS` past the load, for the new document's round trip through its task
   * queue (`LOADED_TASK_EXPRESSION`) and tells `onPageSettled` when that round trip ran in that
   * document after its load: answered after Chromium reported the load of `loaderId`, with the
   * time origin of a document that started loading after the watch did. Any other answer (an
   * error, a context the page replaced, no answer in time) leaves the round trip to the runtime.
   */
  async settled(loaderId: string | undefined, timeoutMs: number): Promise<boolean> {
    if (loaderId === undefined) return this.loadedWithin(() => this.settledOtherwise || this.committed.some((id) => this.loaded.has(id)), timeoutMs);
    let inPage = false;
    let seen: PageSeen | undefined;
    const roundTrip = this.cdp
      .sendUnchecked("Runtime.evaluate", { expression: LOADED_TASK_EXPRESSION, awaitPromise: true, returnByValue: true })
      .then((answer) => {
        const value = (answer as { result?: { value?: unknown }; exceptionDetails?: unknown } | undefined)?.result?.value;
        const origin = typeof value === "object" && value !== null ? (value as { timeOrigin?: unknown }).timeOrigin : undefined;
        inPage = this.loaded.has(loaderId) && typeof origin === "number" && origin >= this.startedAt - TIME_ORIGIN_TOLERANCE_MS;
        seen = pageSeenOf(value);
      })
      .catch(() => undefined);
    const loaded = await this.loadedWithin(() => this.loaded.has(loaderId), timeoutMs);
    if (!loaded) return false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      roundTrip,
      new Promise((resolve) => {
        timer = setTimeout(resolve, BLOCK_SETTLE_PAGE_MS);
      }),
    ]);
    clearTimeout(timer);
    if (inPage) this.options.onPageSettled?.(seen);
    return true;
  }

  private loadedWithin(done: () => boolean, timeoutMs: number): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        this.wake = undefined;
        resolve(false);
      }, timeoutMs);
      const check = (): void => {
        if (!done()) return;
        clearTimeout(timer);
        this.wake = undefined;
        resolve(true);
      };
      this.wake = check;
      check();
    });
  }

  dispose(): void {
    this.wake = undefined;
    this.unsubscribe();
  }
}
