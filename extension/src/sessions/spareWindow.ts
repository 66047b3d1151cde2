/**
 * The spare window: one extension-owned unfocused window with one `about:blank` tab, opened ahead
 * of the next unattended provision, which takes its tab instead of waiting for
 * `chrome.windows.create` (about 80-130 ms on this machine's Chromium, most of a session
 * creation). The spare is no lease: it is never attached, never counted as capacity, and a person
 * cannot attach it from the panel.
 *
 * Its life:
 * - opened once the device is online and enabled, and again after a provision took it;
 * - handed out only while its tab is exactly as Chrome opened it (`about:blank`, nothing pending,
 *   never navigated), so a session starts with no history it could see;
 * - a person who closes it, or navigates it (it is then theirs), is not fought: the spare is
 *   forgotten, never closed by the extension after a navigation, and no new one opens until the
 *   next provision;
 * - closed when the device is disabled, unenrolled or revoked;
 * - its ids live in chrome.storage.session, so a restarted service worker adopts it rather than
 *   leaving it behind. That area clears with the browser epoch, and tab ids change with it: after
 *   a browser restart no spare is known;
 * - it opens on `SPARE_URL` (about:blank with a fragment of its own: the same empty document, no
 *   request, no extra process), so one that Chrome's session restore ("continue where you left
 *   off", or restoring after a crash) brings back after a browser restart is recognised by its URL
 *   and closed (tests/e2e/test_browser_restart.py), while every other tab Chrome restored, the
 *   previous epoch's session tabs and a person's blank windows included, is left alone. Strays
 *   are looked for when the worker starts, before a spare opens, and when a tab shows that URL
 *   while no spare of this worker is opening. The provision that takes the spare drops the
 *   fragment (`history.replaceState`, no navigation) before the session sees its tab, so a session
 *   starts on plain about:blank as before. (A position cannot mark it: Chromium headless ignores
 *   the `left`/`top` asked of windows.create, measured.)
 */
import type { ChromeFacade, TabSnapshot } from "../chrome/facade";
import type { Logger } from "../log";
import type { SocketLike } from "../net/socket";
import { SerialChain } from "./serialChain";

export const SPARE_KEY = "spareWindow";

/** Where the spare opens: an empty about:blank document that only a spare shows (see above). */
export const SPARE_URL = "about:blank#understudy-spare";

/** Drops the spare's fragment in the page, keeping its one history entry: the session sees about:blank. */
export const UNMARK_EXPRESSION = 'history.replaceState(null, "", "about:blank")';

/** What chrome.storage.session holds about the spare. */
export interface SpareRecord {
  readonly tabId: number;
  readonly windowId: number;
  readonly browserEpoch: string;
}

export interface SpareDeps {
  readonly chrome: ChromeFacade;
  readonly log: Logger;
  browserEpoch(): string;
  /** Whether a spare should exist now (the device is enrolled, enabled and not revoked). */
  wanted(): boolean;
  /** Whether a session controls the tab (a lease restored on it, or one being provisioned). */
  isControlled(tabId: number): boolean;
  /** How long after a provision the next spare opens; SPARE_REOPEN_DELAY_MS when absent. */
  readonly reopenDelayMs?: number;
}

/**
 * Opening a window costs the browser a renderer process, ~100 ms of a core. Started right after a
 * provision it competes with that session's own socket upgrade and the server's turns on a small
 * machine (measured on 2 shared cores: `provision_ack` -> session socket open grew from ~7 to
 * ~57 ms), so the next spare opens once a session socket got its first frame (the session is
 * connected), or after this long when none does.
 */
export const SPARE_REOPEN_DELAY_MS = 1_000;

/**
 * Wraps a session socket so `onFirstFrame` runs once, when its first frame arrives (the server's
 * `hello_ack`); everything else passes through unchanged.
 */
export function observeFirstFrame(socket: SocketLike, onFirstFrame: () => void): SocketLike {
  let seen = false;
  return {
    get readyState() {
      return socket.readyState;
    },
    get onopen() {
      return socket.onopen;
    },
    set onopen(handler) {
      socket.onopen = handler;
    },
    get onmessage() {
      return socket.onmessage;
    },
    set onmessage(handler) {
      socket.onmessage =
        handler === null
          ? null
          : (event) => {
              handler(event);
              if (!seen) {
                seen = true;
                onFirstFrame();
              }
            };
    },
    get onclose() {
      return socket.onclose;
    },
    set onclose(handler) {
      socket.onclose = handler;
    },
    get onerror() {
      return socket.onerror;
    },
    set onerror(handler) {
      socket.onerror = handler;
    },
    send: (data) => {
      socket.send(data);
    },
    close: (code, reason) => {
      socket.close(code, reason);
    },
  };
}

export class SpareWindow {
  private ready: TabSnapshot | undefined;
  /** The spare being opened, if any. */
  private opening: Promise<TabSnapshot | undefined> | undefined;
  /** Bumped by `close`: a spare still opening from before is closed as soon as it exists. */
  private generation = 0;
  /** Tabs the extension is closing itself, so their `onRemoved` is not taken for a person's. */
  private readonly closing = new Set<number>();
  /** A person closed or navigated the spare: no new one until the next provision. */
  private heldOff = false;
  private readonly writes = new SerialChain();
  private reopenTimer: ReturnType<typeof setTimeout> | undefined;
  /** Spares handed to a provision: a session's tab from then on, never a stray. */
  private readonly handedOut = new Set<number>();

  constructor(private readonly deps: SpareDeps) {
    deps.chrome.tabs.onRemoved((tabId) => {
      if (this.closing.delete(tabId) || this.ready?.id !== tabId) return;
      this.giveUp("spare_window_closed_by_user");
    });
    deps.chrome.tabs.onUrlChanged((tabId, url) => {
      if (url === SPARE_URL && this.ready?.id !== tabId) {
        // A spare an earlier browser run left, restored by Chrome (or one of ours still opening:
        // left to the sweep before the next spare opens).
        if (this.opening === undefined) this.closeStray(tabId).catch(() => undefined);
        return;
      }
      if (this.ready?.id !== tabId || isBlank(url)) return;
      // Someone (a person) navigated it: the tab has history now and is theirs to keep.
      this.giveUp("spare_window_navigated_by_user");
    });
  }

  /** Whether `tabId` is the ready spare's tab. */
  isSpareTab(tabId: number): boolean {
    return this.ready?.id === tabId;
  }

  /**
   * Adopts the spare a previous service worker of this browser epoch opened, when its tab is
   * still untouched; `controlled` tabs (a lease restored on it) are never adopted.
   */
  async restore(controlled: (tabId: number) => boolean): Promise<void> {
    const stored = (await this.deps.chrome.storage.session.get([SPARE_KEY]))[SPARE_KEY] as SpareRecord | undefined;
    if (stored !== undefined) {
      const tab = stored.browserEpoch === this.deps.browserEpoch() && !controlled(stored.tabId) ? await this.deps.chrome.tabs.get(stored.tabId) : undefined;
      if (tab !== undefined && this.ready === undefined && isUntouched(tab)) {
        this.ready = tab;
      } else {
        // Taken by a provision just before the worker stopped, closed, or navigated: not ours to touch.
        await this.persist(undefined);
      }
    }
    await this.sweep();
  }

  /**
   * Closes the spares an earlier browser run left (restored by Chrome): tabs on `SPARE_URL` that
   * are neither the ready spare nor a session's. Only while no spare of this worker is opening.
   */
  async sweep(): Promise<void> {
    if (this.opening !== undefined) return;
    const strays = (await this.deps.chrome.tabs.withUrl(SPARE_URL)).filter((id) => id !== this.ready?.id);
    await Promise.all(strays.map((id) => this.closeStray(id)));
  }

  private async closeStray(tabId: number): Promise<void> {
    if (this.ready?.id === tabId || this.handedOut.has(tabId) || this.deps.isControlled(tabId) || this.closing.has(tabId)) return;
    this.deps.log.info("spare_window_left_from_earlier_run_closed");
    await this.removeTab(tabId);
  }

  /** Opens a spare a little later (after a provision took one): see SPARE_REOPEN_DELAY_MS. */
  ensureSoon(): void {
    if (this.reopenTimer !== undefined) return;
    this.reopenTimer = setTimeout(() => {
      this.reopenTimer = undefined;
      this.ensure();
    }, this.deps.reopenDelayMs ?? SPARE_REOPEN_DELAY_MS);
  }

  /** Opens a spare unless one is ready, on its way, held off, or not wanted. */
  ensure(): void {
    if (this.ready !== undefined || this.opening !== undefined || this.heldOff || !this.deps.wanted()) return;
    const generation = this.generation;
    const opening = this.sweep()
      .catch(() => undefined)
      .then(() => this.open(generation));
    this.opening = opening;
    opening
      .catch(() => undefined)
      .finally(() => {
        if (this.opening === opening) this.opening = undefined;
      });
  }

  /**
   * A clean `about:blank` tab in its own unfocused window for a provision: the spare when it is
   * ready (or opening), otherwise a new window. The caller owns the tab from here on.
   */
  async take(): Promise<TabSnapshot> {
    this.heldOff = false;
    if (this.ready === undefined && this.opening !== undefined) await this.opening.catch(() => undefined);
    const spare = this.ready;
    if (spare !== undefined) {
      this.ready = undefined;
      this.handedOut.add(spare.id);
      // Not awaited: a record naming a leased tab is dropped by `restore`, which skips leased tabs.
      this.persist(undefined).catch(() => undefined);
      const now = await this.deps.chrome.tabs.get(spare.id);
      if (now !== undefined && isUntouched(now)) return now;
      this.deps.log.info("spare_window_not_clean");
    }
    return this.deps.chrome.windows.createUnfocusedBlank();
  }

  /** Closes the spare (the device was disabled, unenrolled or revoked); one still opening follows. */
  async close(): Promise<void> {
    this.generation += 1;
    if (this.reopenTimer !== undefined) clearTimeout(this.reopenTimer);
    this.reopenTimer = undefined;
    const spare = this.ready;
    this.ready = undefined;
    if (spare !== undefined) await this.removeTab(spare.id);
    await this.persist(undefined);
  }

  private async open(generation: number): Promise<TabSnapshot | undefined> {
    let tab: TabSnapshot;
    try {
      tab = await this.deps.chrome.windows.createUnfocused(SPARE_URL);
    } catch {
      this.deps.log.warn("spare_window_open_failed");
      return undefined;
    }
    if (generation !== this.generation || !this.deps.wanted() || this.ready !== undefined) {
      await this.removeTab(tab.id);
      return undefined;
    }
    this.ready = tab;
    await this.persist({ tabId: tab.id, windowId: tab.windowId, browserEpoch: this.deps.browserEpoch() });
    return tab;
  }

  private giveUp(event: string): void {
    this.ready = undefined;
    this.heldOff = true;
    this.deps.log.info(event);
    this.persist(undefined).catch(() => undefined);
  }

  private async removeTab(tabId: number): Promise<void> {
    this.closing.add(tabId);
    try {
      await this.deps.chrome.tabs.remove(tabId);
    } catch {
      this.closing.delete(tabId); // already gone: no onRemoved of ours will follow
    }
  }

  private persist(record: SpareRecord | undefined): Promise<void> {
    return this.writes.run(async () => {
      if (record === undefined) await this.deps.chrome.storage.session.remove([SPARE_KEY]);
      else await this.deps.chrome.storage.session.set({ [SPARE_KEY]: record });
    });
  }
}

/** The spare's own URL, or the empty document before it. */
function isBlank(url: string | undefined): boolean {
  return url === undefined || url === "" || url === "about:blank" || url === SPARE_URL;
}

/** As `chrome.windows.create` left it: `SPARE_URL` (committed or about to be), nothing else pending. */
function isUntouched(tab: TabSnapshot): boolean {
  return (tab.url === SPARE_URL || tab.pendingUrl === SPARE_URL) && isBlank(tab.url) && isBlank(tab.pendingUrl);
}
