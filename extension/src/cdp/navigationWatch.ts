/**
 * Waits for a main-frame navigation to finish loading. Matching on the navigation's loaderId
 * (from `Page.lifecycleEvent` "load") rather than on the next `Page.loadEventFired` matters: the
 * error page of an earlier, blocked navigation can fire its load event after the next command
 * started, and would otherwise end the wait before the new document exists.
 */
import type { CdpSession } from "./cdpSession";

interface FrameNavigated {
  readonly frame?: { readonly parentId?: string; readonly loaderId?: string };
  readonly type?: string;
}

interface LifecycleEvent {
  readonly loaderId?: string;
  readonly name?: string;
}

export class NavigationWatch {
  private readonly loaded = new Set<string>();
  private readonly committed: string[] = [];
  private settledOtherwise = false;
  private wake: (() => void) | undefined;
  private readonly unsubscribe: () => void;

  constructor(cdp: CdpSession) {
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
   */
  settled(loaderId: string | undefined, timeoutMs: number): Promise<boolean> {
    const done = (): boolean =>
      loaderId === undefined ? this.settledOtherwise || this.committed.some((id) => this.loaded.has(id)) : this.loaded.has(loaderId);
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
