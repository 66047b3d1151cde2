/**
 * All runtimes of this profile, indexed by session id, lease id and tab id; at most two. Owns the
 * chrome listeners that route CDP events by tab id, close popups of controlled tabs, and notice
 * closed tabs and dropped debuggers, and the popup fence (a network rule that refuses the first
 * request of a popup while any tab is controlled; see popupFence.ts). Tabs the extension did not create or was not handed by a
 * person (every other tab, including tabs Chrome restored) are never attached, listed or closed.
 */
import { isControlledPopup } from "../cdp/popupGuard";
import { canonicalOrigin, localPolicyAdmits } from "../config/origins";
import { DEVICE_TAB_CAPACITY, FENCE_REPAIR_WINDOW_MS } from "../constants";
import { PopupFence } from "./popupFence";
import type {
  DeviceClientCloseAck,
  DeviceClientHello,
  DeviceClientLeaseReleased,
  DeviceClientProvisionAck,
  DeviceServerClose,
  DeviceServerProvision,
  DeviceServerSessionTicket,
  PopupContainmentByKind,
} from "@understudy/protocol";
import type { LeaseRecord } from "./leaseStore";
import type { RuntimeDeps } from "./runtimeDeps";
import { type RuntimeView, SessionRuntime } from "./sessionRuntime";
import { SPARE_URL, SpareWindow, UNMARK_EXPRESSION, observeFirstFrame } from "./spareWindow";

export interface ManagerDeps extends RuntimeDeps {
  /** Whether the device is enabled (provisioning and attaching are refused otherwise). */
  enabled(): boolean;
  /**
   * Whether a spare window should be kept ready now (see spareWindow.ts); never when absent.
   * Also false while the device is disabled, unenrolled or revoked.
   */
  spareWanted?(): boolean;
  /** How long after a provision the next spare opens (see spareWindow.ts); unit tests shorten it. */
  readonly spareReopenDelayMs?: number;
}

type ReleaseReason = DeviceClientLeaseReleased["reason"];

interface EarlyEvent {
  readonly method: string;
  readonly params: unknown;
  readonly sessionId: string | undefined;
}

/** Events kept per starting tab; a start takes a few CDP round trips, so this is never reached. */
const EARLY_EVENTS_PER_TAB = 256;

export class SessionManager {
  private readonly bySession = new Map<string, SessionRuntime>();
  private readonly byLease = new Map<string, SessionRuntime>();
  private readonly byTab = new Map<number, SessionRuntime>();
  /** Slots reserved by provisions and attaches that are still opening their tab. */
  private reserved = 0;
  /**
   * Leases of attended attaches the backend granted that are not indexed yet, each with the
   * session ticket that arrived meanwhile: the backend sends `session_ticket` right behind
   * `attach_result`, while the extension is still attaching CDP.
   */
  private readonly attaching = new Map<string, DeviceServerSessionTicket | undefined>();
  /**
   * CDP events of tabs whose runtime is still starting: the debugger is attached and the origin
   * guard installed before the runtime is indexed, so a document request paused (or a related
   * target held at start) in that window would otherwise never be answered. Replayed, in order,
   * when the runtime is indexed; dropped when the tab or its attachment goes away.
   */
  private readonly early = new Map<number, EarlyEvent[]>();
  private readonly fence: PopupFence;
  /**
   * Tabs someone else opened while the fence was up, with when: the fence may have refused their
   * first request before `tabs.onCreated` spared them, and such a tab is reloaded once.
   */
  private readonly sparedLate = new Map<number, number>();
  /** The manager's dependencies, plus the popup fence's admission for the runtimes. */
  private readonly deps: ManagerDeps;
  /** The window opened ahead of the next provision; never a lease, never capacity. */
  readonly spare: SpareWindow;

  constructor(deps: ManagerDeps) {
    const { chrome } = deps;
    const fence = new PopupFence(chrome.netRules, chrome.tabs, deps.log);
    this.fence = fence;
    this.deps = {
      ...deps,
      admitDocument: (url) => fence.admit(url),
      // A session socket's first frame: that session is connected, the next spare may open.
      socketFactory: (url) => observeFirstFrame(deps.socketFactory(url), () => this.spare.ensure()),
    };
    this.spare = new SpareWindow({
      chrome,
      log: deps.log,
      browserEpoch: () => deps.browserEpoch(),
      wanted: () => deps.enabled() && (deps.spareWanted?.() ?? false),
      isControlled: (tabId) => this.byTab.has(tabId),
      ...(deps.spareReopenDelayMs === undefined ? {} : { reopenDelayMs: deps.spareReopenDelayMs }),
    });
    chrome.debugger.onEvent((target, method, params) => {
      const runtime = this.byTab.get(target.tabId);
      if (runtime !== undefined) {
        runtime.tab.handleEvent(method, params, target.sessionId);
        return;
      }
      // Only a runtime of this manager attaches the debugger, so the tab's runtime is starting.
      const queue = this.early.get(target.tabId) ?? [];
      if (queue.length >= EARLY_EVENTS_PER_TAB) {
        deps.log.warn("early_cdp_events_dropped");
        return;
      }
      queue.push({ method, params, sessionId: target.sessionId });
      this.early.set(target.tabId, queue);
    });
    chrome.debugger.onDetach((tabId, reason) => {
      this.early.delete(tabId);
      this.onDebuggerDetached(tabId, reason);
    });
    chrome.tabs.onCreated((tab) => {
      if (!isControlledPopup(tab, (id) => this.byTab.has(id))) {
        // Someone else's tab (a person's, another extension's): the fence must let it load.
        if (fence.isUp) this.sparedLate.set(tab.id, deps.now());
        fence.spare(tab.id).catch(() => undefined);
        return;
      }
      if (tab.openerTabId !== undefined) this.byTab.get(tab.openerTabId)?.tab.noteReaction();
      chrome.tabs.remove(tab.id).catch(() => {
        deps.log.warn("popup_close_failed");
      });
      deps.health.bump("popupsClosed");
      deps.emitHealth();
    });
    // The record of a popup comes from here: it names the URL the popup was about to load (the
    // new tab's own url is still empty when tabs.onCreated fires) and the tab that opened it.
    chrome.navigation.onCreatedNavigationTarget((sourceTabId, _tabId, url) => {
      this.byTab.get(sourceTabId)?.popupBlocked(url);
    });
    chrome.navigation.onMainFrameBlocked((tabId) => {
      this.repairSparedTab(tabId).catch(() => {
        deps.log.warn("fenced_tab_reload_failed");
      });
    });
    chrome.tabs.onRemoved((tabId) => {
      this.early.delete(tabId);
      this.sparedLate.delete(tabId);
      this.fence.forget(tabId);
      const runtime = this.byTab.get(tabId);
      if (runtime !== undefined) this.release(runtime, "tab_closed", false);
    });
  }

  /** Whether `runtime` is the object indexed for its session now. */
  isCurrent(runtime: object): boolean {
    for (const current of this.bySession.values()) if (current === runtime) return true;
    return false;
  }

  isControlledTab(tabId: number): boolean {
    return this.byTab.has(tabId);
  }

  bySessionId(sessionId: string): SessionRuntime | undefined {
    return this.bySession.get(sessionId);
  }

  /** How each kind of popup is contained now (for the device hello). */
  popupContainment(): PopupContainmentByKind {
    return this.fence.containment();
  }

  freeCapacity(): number {
    return Math.max(0, DEVICE_TAB_CAPACITY - this.bySession.size - this.reserved);
  }

  leasesForHello(): DeviceClientHello["leases"] {
    return [...this.bySession.values()].slice(0, DEVICE_TAB_CAPACITY).map((r) => ({
      leaseId: r.leaseId,
      sessionId: r.sessionId,
      leaseEpoch: r.leaseEpoch,
      tabId: r.tabId,
    }));
  }

  views(): RuntimeView[] {
    return [...this.bySession.values()].map((r) => r.view());
  }

  /**
   * Rebuilds runtimes after a service-worker restart from leases of the current browser epoch.
   * Records of another epoch cannot exist (chrome.storage.session clears with the epoch), but are
   * dropped defensively; their tabs are never touched.
   */
  async restore(records: readonly LeaseRecord[]): Promise<void> {
    for (const record of records) {
      if (record.browserEpoch !== this.deps.browserEpoch() || this.bySession.size >= DEVICE_TAB_CAPACITY) {
        await this.deps.leases.remove(record.leaseId);
        continue;
      }
      // The session's journal and outbox are read while the tab is looked up.
      const stored = SessionRuntime.readStored(this.deps, record.sessionId);
      stored.catch(() => undefined); // observed by start; not left unhandled when the tab is gone
      const tab = await this.deps.chrome.tabs.get(record.tabId);
      if (tab === undefined) {
        await this.deps.leases.remove(record.leaseId);
        continue;
      }
      try {
        await this.fence.raise([...(record.allowedOrigins ?? []), tab.url]);
        this.index(await SessionRuntime.start(this.deps, record, true, stored));
      } catch {
        this.deps.log.warn("restore_attach_failed");
        await this.deps.leases.remove(record.leaseId);
      }
    }
    await this.lowerFenceIfIdle();
    // After the leases: a spare record naming a tab a lease now holds is dropped, not adopted.
    await this.spare.restore((tabId) => this.byTab.has(tabId));
  }

  /**
   * Opens an extension-owned about:blank tab in an unfocused window for an unattended lease: the
   * spare window's when one is ready. The caller opens the next spare once the ack is sent.
   */
  async provision(frame: DeviceServerProvision): Promise<DeviceClientProvisionAck> {
    const base = { type: "provision_ack", leaseId: frame.leaseId, sessionId: frame.sessionId, leaseEpoch: frame.leaseEpoch, browserEpoch: this.deps.browserEpoch() } as const;
    const refuse = (code: string, message: string): DeviceClientProvisionAck => ({ ...base, outcome: "refused", error: { code, message } });
    const existing = this.byLease.get(frame.leaseId);
    if (existing !== undefined) {
      if (!(await existing.adoptLeaseEpoch(frame.leaseEpoch))) return refuse("stale_lease_epoch", "This lease already runs with a newer lease epoch.");
      return { ...base, outcome: "provisioned", tabId: existing.tabId };
    }
    if (!this.deps.enabled()) return refuse("device_disabled", "The device is disabled in the extension; an operator must enable it.");
    if (this.bySession.has(frame.sessionId)) return refuse("session_already_held", "This session already holds another lease on this device.");
    if (this.freeCapacity() === 0) return refuse("capacity_exhausted", `This device already controls ${DEVICE_TAB_CAPACITY} tabs.`);
    const origins = frame.allowedOrigins.map((o) => canonicalOrigin(o));
    if (origins.some((o) => o === undefined || !localPolicyAdmits(this.deps.localPolicy(), o))) {
      return refuse("origin_not_allowed_locally", "An allowed origin is outside this device's local origin policy.");
    }
    this.reserved += 1;
    let tabId: number | undefined;
    // The session's journal and outbox are read while Chrome opens the window (their keys depend
    // only on the session id); `start` awaits the read before it attaches, as it always did.
    const stored = SessionRuntime.readStored(this.deps, frame.sessionId);
    stored.catch(() => undefined); // observed by start; not left unhandled when the window fails
    try {
      // Up before the tab exists, so the tab's popups meet it from the first one on.
      await this.fence.raise(origins as string[]);
      const tab = await this.spare.take();
      tabId = tab.id;
      await this.fence.spare(tab.id);
      const record: LeaseRecord = {
        leaseId: frame.leaseId,
        sessionId: frame.sessionId,
        leaseEpoch: frame.leaseEpoch,
        tabId: tab.id,
        mode: "unattended",
        allowedOrigins: origins as string[],
        generation: 1,
        browserEpoch: this.deps.browserEpoch(),
      };
      // The spare's mark goes before the session sees its tab (see spareWindow.ts).
      const marked = tab.url === SPARE_URL || tab.pendingUrl === SPARE_URL;
      this.index(await SessionRuntime.start(this.deps, record, false, stored, marked ? [UNMARK_EXPRESSION] : []));
      return { ...base, outcome: "provisioned", tabId: tab.id };
    } catch {
      this.deps.log.warn("provision_failed");
      if (tabId !== undefined) await this.deps.chrome.tabs.remove(tabId).catch(() => undefined);
      return refuse("provision_failed", "The extension could not open and attach a tab; check the browser, then retry.");
    } finally {
      this.reserved -= 1;
      await this.lowerFenceIfIdle();
    }
  }

  /** Releases a lease on the backend's instruction: closes an unattended tab, detaches an attended one. */
  async close(frame: DeviceServerClose): Promise<DeviceClientCloseAck> {
    const runtime = this.byLease.get(frame.leaseId);
    if (runtime !== undefined && frame.leaseEpoch >= runtime.leaseEpoch) {
      this.unindex(runtime);
      await runtime.close(true);
      await this.lowerFenceIfIdle();
    }
    // A lease this extension does not hold (late provision, already released) is acknowledged too.
    return { type: "close_ack", leaseId: frame.leaseId, leaseEpoch: frame.leaseEpoch };
  }

  /** Hands a session-socket ticket to its runtime. */
  async sessionTicket(frame: DeviceServerSessionTicket): Promise<void> {
    const runtime = this.byLease.get(frame.leaseId);
    if (runtime === undefined && this.attaching.has(frame.leaseId)) {
      this.attaching.set(frame.leaseId, frame);
      return;
    }
    if (runtime === undefined || runtime.sessionId !== frame.sessionId) {
      this.deps.log.warn("session_ticket_for_unknown_lease");
      return;
    }
    if (!(await runtime.adoptLeaseEpoch(frame.leaseEpoch))) {
      this.deps.log.warn("session_ticket_stale_epoch");
      return;
    }
    runtime.connect(frame);
  }

  /**
   * The backend granted an attended attach of `leaseId`: hold its session ticket until the
   * runtime exists. Ends with `attachTab` or `abandonAttach`.
   */
  expectAttach(leaseId: string): void {
    this.attaching.set(leaseId, undefined);
  }

  /** The attach of `leaseId` did not complete; a ticket held for it is dropped unused. */
  abandonAttach(leaseId: string): void {
    this.attaching.delete(leaseId);
  }

  /** Attaches an existing tab a person picked, after the backend accepted the attach request. */
  async attachTab(record: LeaseRecord): Promise<SessionRuntime> {
    this.reserved += 1;
    try {
      // The person's tab shows a page already; its host joins the fence with the session's origins.
      const shown = await this.deps.chrome.tabs.get(record.tabId);
      await this.fence.raise([...(record.allowedOrigins ?? []), ...(shown === undefined ? [] : [shown.url])]);
      const runtime = await SessionRuntime.start(this.deps, record, false);
      this.index(runtime);
      const early = this.attaching.get(record.leaseId);
      this.attaching.delete(record.leaseId);
      if (early !== undefined) await this.sessionTicket(early);
      return runtime;
    } finally {
      this.reserved -= 1;
      await this.lowerFenceIfIdle();
    }
  }

  /** A person detached a session from the panel: CDP detaches, the tab stays open. */
  detachByUser(sessionId: string): boolean {
    const runtime = this.bySession.get(sessionId);
    if (runtime === undefined) return false;
    this.release(runtime, "detached_by_user", false);
    return true;
  }

  /**
   * Detaches everything (device disabled, unenrolled): extension-owned tabs and the spare window
   * close, attended tabs stay.
   */
  async releaseAll(): Promise<void> {
    await this.spare.close();
    for (const runtime of [...this.bySession.values()]) {
      this.unindex(runtime);
      await runtime.close(true);
    }
    await this.lowerFenceIfIdle();
  }

  private onDebuggerDetached(tabId: number, reason: string): void {
    const runtime = this.byTab.get(tabId);
    if (runtime === undefined) return;
    runtime.markDetached();
    this.deps.health.bump("debuggerDetached");
    this.deps.emitHealth();
    const why: ReleaseReason = reason === "canceled_by_user" ? "detached_by_user" : reason === "target_closed" ? "tab_closed" : "debugger_detached";
    this.release(runtime, why, false);
  }

  private release(runtime: SessionRuntime, reason: ReleaseReason, closeTab: boolean): void {
    if (!this.isCurrent(runtime)) return;
    this.unindex(runtime);
    this.deps.sendDevice({ type: "lease_released", leaseId: runtime.leaseId, leaseEpoch: runtime.leaseEpoch, reason });
    runtime.close(closeTab).catch(() => {
      this.deps.log.warn("runtime_close_failed");
    });
    this.lowerFenceIfIdle().catch(() => undefined);
  }

  /**
   * Someone else's new tab lost its first request to the fence (it raced `tabs.onCreated`): once
   * the rule spares the tab, reload it, once. Chrome's reload repeats the refused navigation
   * (method and body included); the request never left, so it is sent exactly once.
   */
  private async repairSparedTab(tabId: number): Promise<void> {
    const createdAt = this.sparedLate.get(tabId);
    if (createdAt === undefined || this.byTab.has(tabId)) return;
    this.sparedLate.delete(tabId);
    if (this.deps.now() - createdAt > FENCE_REPAIR_WINDOW_MS) return;
    await this.fence.spare(tabId);
    await this.deps.chrome.tabs.reload(tabId);
    this.deps.log.info("fenced_tab_reloaded");
  }

  /** With no tab controlled or about to be, the fence comes down and no tab is held back. */
  private async lowerFenceIfIdle(): Promise<void> {
    if (this.byTab.size === 0 && this.reserved === 0) await this.fence.lower();
  }

  private index(runtime: SessionRuntime): void {
    this.sparedLate.delete(runtime.tabId); // controlled now: its navigations are the guard's
    this.bySession.set(runtime.sessionId, runtime);
    this.byLease.set(runtime.leaseId, runtime);
    this.byTab.set(runtime.tabId, runtime);
    const early = this.early.get(runtime.tabId);
    this.early.delete(runtime.tabId);
    for (const event of early ?? []) runtime.tab.handleEvent(event.method, event.params, event.sessionId);
  }

  private unindex(runtime: SessionRuntime): void {
    if (this.bySession.get(runtime.sessionId) === runtime) this.bySession.delete(runtime.sessionId);
    if (this.byLease.get(runtime.leaseId) === runtime) this.byLease.delete(runtime.leaseId);
    if (this.byTab.get(runtime.tabId) === runtime) this.byTab.delete(runtime.tabId);
  }
}
