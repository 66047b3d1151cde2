/**
 * A fake ChromeFacade: in-memory storage areas, tabs, and a scriptable CDP per tab. Every CDP
 * command is recorded; tests install handlers per method and emit CDP events by tab id.
 */
import type {
  CdpTarget,
  ChromeFacade,
  DebuggerDetachListener,
  DebuggerEventListener,
  MainFrameBlockRule,
  PanelMessageListener,
  StorageArea,
  TabSnapshot,
} from "../../src/chrome/facade";

export class FakeStorageArea implements StorageArea {
  readonly data = new Map<string, unknown>();
  /** When set, every `set` rejects (quota exceeded, storage failure). */
  failSet = false;
  /** Every value ever written, serialised, for "never stored" assertions. */
  readonly writes: string[] = [];
  /** The keys of every `get`, one entry per call. */
  readonly reads: (readonly string[])[] = [];
  /** The keys of every `set`, one entry per call. */
  readonly setKeys: (readonly string[])[] = [];

  get(keys: readonly string[]): Promise<Record<string, unknown>> {
    this.reads.push([...keys]);
    const result: Record<string, unknown> = {};
    for (const key of keys) if (this.data.has(key)) result[key] = structuredClone(this.data.get(key));
    return Promise.resolve(result);
  }

  /** When set, every `set` waits for it before it writes (a slow storage write). */
  gate: Promise<void> | undefined;

  async set(items: Record<string, unknown>): Promise<void> {
    if (this.gate !== undefined) await this.gate;
    if (this.failSet) throw new Error("QUOTA_BYTES quota exceeded");
    this.setKeys.push(Object.keys(items));
    for (const [key, value] of Object.entries(items)) {
      this.writes.push(JSON.stringify(value));
      this.data.set(key, structuredClone(value));
    }
  }

  remove(keys: readonly string[]): Promise<void> {
    for (const key of keys) this.data.delete(key);
    return Promise.resolve();
  }
}

export interface CdpCall {
  readonly tabId: number;
  readonly method: string;
  readonly params: Record<string, unknown>;
  readonly sessionId?: string;
}

export type CdpHandler = (params: Record<string, unknown>, target: CdpTarget) => unknown;

/** Shared storage survives a simulated service-worker restart: pass it to the next FakeChrome. */
export interface FakeStorage {
  readonly local: FakeStorageArea;
  readonly session: FakeStorageArea;
  readonly managed: FakeStorageArea;
}

export function newStorage(): FakeStorage {
  return { local: new FakeStorageArea(), session: new FakeStorageArea(), managed: new FakeStorageArea() };
}

export class FakeChrome implements ChromeFacade {
  readonly tabsById = new Map<number, TabSnapshot>();
  readonly attached = new Set<number>();
  readonly calls: CdpCall[] = [];
  readonly handlers = new Map<string, CdpHandler>();
  readonly removedTabs: number[] = [];
  readonly activatedTabs: number[] = [];
  /** Tabs whose start-up navigation Chromium left pending (see startupTabs.ts). */
  readonly stalledTabs = new Set<number>();
  readonly navigatedTabs: { tabId: number; url: string }[] = [];
  readonly alarmsCreated: string[] = [];
  /** The id the next tab gets; a test of a restart moves it past the previous fake's tabs. */
  nextTabId = 100;
  private nextWindowId = 10;
  private readonly eventListeners: DebuggerEventListener[] = [];
  private readonly detachListeners: DebuggerDetachListener[] = [];
  private readonly createdListeners: ((tab: TabSnapshot) => void)[] = [];
  private readonly removedListeners: ((tabId: number) => void)[] = [];
  private readonly urlListeners: ((tabId: number, url: string) => void)[] = [];
  /** How many `tabs.get` calls were made. */
  tabsGets = 0;
  /** How many windows `windows.createUnfocusedBlank` opened. */
  windowsCreated = 0;
  private readonly messageListeners: PanelMessageListener[] = [];
  private readonly alarmListeners: ((name: string) => void)[] = [];
  private readonly changeListeners: ((area: string, keys: readonly string[]) => void)[] = [];

  constructor(readonly store: FakeStorage = newStorage()) {
    this.handlers.set("Page.getFrameTree", (_params, target) => ({ frameTree: { frame: { id: `main-${target.tabId}` } } }));
    this.handlers.set("DOM.describeNode", () => ({ node: { attributes: [] } }));
  }

  /** Adds a tab as a person (or Chrome's session restore) would; fires tabs.onCreated. */
  openTab(url: string, options: { openerTabId?: number; title?: string; active?: boolean; pendingUrl?: string } = {}): TabSnapshot {
    const tab: TabSnapshot = {
      id: this.nextTabId++,
      windowId: this.nextWindowId,
      url,
      title: options.title ?? "",
      active: options.active ?? false,
      ...(options.openerTabId === undefined ? {} : { openerTabId: options.openerTabId }),
      ...(options.pendingUrl === undefined ? {} : { pendingUrl: options.pendingUrl }),
    };
    this.tabsById.set(tab.id, tab);
    for (const listener of this.createdListeners) listener(tab);
    return tab;
  }

  setTabUrl(tabId: number, url: string, title = ""): void {
    const tab = this.tabsById.get(tabId);
    if (tab !== undefined) this.tabsById.set(tabId, { ...tab, url, title });
  }

  /** A person typed `url` into the tab's address bar: the URL changes and tabs.onUpdated says so. */
  navigateByUser(tabId: number, url: string): void {
    this.setTabUrl(tabId, url);
    for (const listener of this.urlListeners) listener(tabId, url);
  }

  closeTabByUser(tabId: number): void {
    this.tabsById.delete(tabId);
    for (const listener of this.removedListeners) listener(tabId);
  }

  emitCdp(tabId: number, method: string, params: unknown, sessionId?: string): void {
    const target: CdpTarget = sessionId === undefined ? { tabId } : { tabId, sessionId };
    for (const listener of this.eventListeners) listener(target, method, params);
  }

  emitDetach(tabId: number, reason: string): void {
    this.attached.delete(tabId);
    for (const listener of this.detachListeners) listener(tabId, reason);
  }

  fireAlarm(name: string): void {
    for (const listener of this.alarmListeners) listener(name);
  }

  callsOf(method: string, tabId?: number): CdpCall[] {
    return this.calls.filter((c) => c.method === method && (tabId === undefined || c.tabId === tabId));
  }

  readonly debugger = {
    attach: (tabId: number): Promise<void> => {
      if (!this.tabsById.has(tabId)) return Promise.reject(new Error(`No tab with given id ${tabId}.`));
      if (this.attached.has(tabId)) return Promise.reject(new Error("Another debugger is already attached to the tab"));
      this.attached.add(tabId);
      return Promise.resolve();
    },
    detach: (tabId: number): Promise<void> => {
      if (!this.attached.delete(tabId)) return Promise.reject(new Error("Debugger is not attached to the tab"));
      return Promise.resolve();
    },
    sendCommand: async (target: CdpTarget, method: string, params?: object): Promise<unknown> => {
      const record = (params ?? {}) as Record<string, unknown>;
      this.calls.push({ tabId: target.tabId, method, params: record, ...(target.sessionId === undefined ? {} : { sessionId: target.sessionId }) });
      if (!this.attached.has(target.tabId)) throw new Error("Debugger is not attached to the tab");
      const handler = this.handlers.get(method);
      return handler === undefined ? {} : await handler(record, target);
    },
    onEvent: (listener: DebuggerEventListener): void => {
      this.eventListeners.push(listener);
    },
    onDetach: (listener: DebuggerDetachListener): void => {
      this.detachListeners.push(listener);
    },
  };

  readonly tabs = {
    get: (tabId: number): Promise<TabSnapshot | undefined> => {
      this.tabsGets += 1;
      return Promise.resolve(this.tabsById.get(tabId));
    },
    remove: (tabId: number): Promise<void> => {
      this.removedTabs.push(tabId);
      this.closeTabByUser(tabId);
      return Promise.resolve();
    },
    activate: (tabId: number): Promise<void> => {
      this.activatedTabs.push(tabId);
      return Promise.resolve();
    },
    allIds: (): Promise<number[]> => Promise.resolve([...this.tabsById.keys()]),
    withUrl: (url: string): Promise<number[]> => Promise.resolve([...this.tabsById.values()].flatMap((t) => (t.url === url || t.pendingUrl === url ? [t.id] : []))),
    stalled: (): Promise<{ id: number; pendingUrl: string }[]> =>
      Promise.resolve([...this.tabsById.values()].flatMap((t) => (this.stalledTabs.has(t.id) && t.pendingUrl !== undefined ? [{ id: t.id, pendingUrl: t.pendingUrl }] : []))),
    reload: (tabId: number): Promise<void> => {
      this.reloadedTabs.push(tabId);
      return Promise.resolve();
    },
    navigate: (tabId: number, url: string): Promise<void> => {
      this.navigatedTabs.push({ tabId, url });
      this.stalledTabs.delete(tabId);
      this.setTabUrl(tabId, url);
      return Promise.resolve();
    },
    onCreated: (listener: (tab: TabSnapshot) => void): void => {
      this.createdListeners.push(listener);
    },
    onRemoved: (listener: (tabId: number) => void): void => {
      this.removedListeners.push(listener);
    },
    onUrlChanged: (listener: (tabId: number, url: string) => void): void => {
      this.urlListeners.push(listener);
    },
  };

  readonly windows = {
    createUnfocusedBlank: (): Promise<TabSnapshot> => this.windows.createUnfocused("about:blank"),
    createUnfocused: (url: string): Promise<TabSnapshot> => {
      this.nextWindowId += 1;
      this.windowsCreated += 1;
      return Promise.resolve(this.openTab(url));
    },
  };

  get storage(): ChromeFacade["storage"] {
    return {
      local: this.store.local,
      session: this.store.session,
      managed: this.store.managed,
      onChanged: (listener) => {
        this.changeListeners.push(listener);
      },
    };
  }

  readonly runtime = {
    extensionVersion: "0.1.0",
    onMessage: (listener: PanelMessageListener): void => {
      this.messageListeners.push(listener);
    },
    onStartup: (): void => undefined,
  };

  readonly alarms = {
    create: (name: string): Promise<void> => {
      this.alarmsCreated.push(name);
      return Promise.resolve();
    },
    onAlarm: (listener: (name: string) => void): void => {
      this.alarmListeners.push(listener);
    },
  };

  readonly permissions = {
    containsOrigin: (): Promise<boolean> => Promise.resolve(true),
  };

  private readonly navigationTargetListeners: ((sourceTabId: number, tabId: number, url: string) => void)[] = [];

  private readonly mainFrameBlockedListeners: ((tabId: number) => void)[] = [];
  readonly reloadedTabs: number[] = [];

  readonly navigation = {
    onCreatedNavigationTarget: (listener: (sourceTabId: number, tabId: number, url: string) => void): void => {
      this.navigationTargetListeners.push(listener);
    },
    onMainFrameBlocked: (listener: (tabId: number) => void): void => {
      this.mainFrameBlockedListeners.push(listener);
    },
  };

  /** The tab's main-frame request was refused (net::ERR_BLOCKED_BY_CLIENT), as webNavigation reports it. */
  emitMainFrameBlocked(tabId: number): void {
    for (const listener of this.mainFrameBlockedListeners) listener(tabId);
  }

  /**
   * A page of `sourceTabId` opens a popup towards `url`, as Chromium reports it: tabs.onCreated
   * (with the opener) and then webNavigation.onCreatedNavigationTarget.
   */
  openPopup(sourceTabId: number, url: string): TabSnapshot {
    const tab = this.openTab("", { openerTabId: sourceTabId });
    for (const listener of this.navigationTargetListeners) listener(sourceTabId, tab.id, url);
    return tab;
  }

  /** The session rules installed now, by id, as the real API would hold them. */
  readonly sessionRules = new Map<number, MainFrameBlockRule>();
  /** When set, every rule update rejects (the API refused the rule). */
  failRuleUpdates = false;

  readonly netRules = {
    available: true,
    putMainFrameBlock: (rule: MainFrameBlockRule): Promise<void> => {
      if (this.failRuleUpdates) return Promise.reject(new Error("Rule update refused"));
      this.sessionRules.set(rule.id, { id: rule.id, excludedTabIds: [...rule.excludedTabIds], initiatorDomains: [...rule.initiatorDomains] });
      return Promise.resolve();
    },
    remove: (ruleId: number): Promise<void> => {
      if (this.failRuleUpdates) return Promise.reject(new Error("Rule update refused"));
      this.sessionRules.delete(ruleId);
      return Promise.resolve();
    },
  };

  /**
   * Whether a main-frame request in `tabId` started by a document on `initiatorHost` (undefined:
   * no initiator, as for a typed URL) would be blocked by the installed rules.
   */
  blocksMainFrameIn(tabId: number, initiatorHost: string | undefined): boolean {
    const matches = (host: string, domain: string): boolean => host === domain || host.endsWith(`.${domain}`);
    return [...this.sessionRules.values()].some(
      (rule) => !rule.excludedTabIds.includes(tabId) && initiatorHost !== undefined && rule.initiatorDomains.some((d) => matches(initiatorHost, d)),
    );
  }
}
