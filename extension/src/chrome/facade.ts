/**
 * One interface over the chrome.* APIs the service worker uses (debugger, tabs, windows,
 * storage, runtime, alarms, permissions, declarativeNetRequest session rules, webNavigation). The real implementation is `realChrome.ts`; tests pass
 * a fake, so every part above this file runs without a browser.
 */

/** A CDP target: the tab's root session, or a child session (auto-attached frame or worker). */
export interface CdpTarget {
  readonly tabId: number;
  readonly sessionId?: string;
}

/** What the extension needs to know about a tab. */
export interface TabSnapshot {
  readonly id: number;
  readonly windowId: number;
  readonly url: string;
  readonly title: string;
  readonly active: boolean;
  readonly openerTabId?: number;
  /** The URL a tab is about to load (a popup's first navigation), when Chrome reports one. */
  readonly pendingUrl?: string;
}

export type DebuggerEventListener = (target: CdpTarget, method: string, params: unknown) => void;
export type DebuggerDetachListener = (tabId: number, reason: string) => void;

export interface DebuggerApi {
  attach(tabId: number): Promise<void>;
  detach(tabId: number): Promise<void>;
  sendCommand(target: CdpTarget, method: string, params?: object): Promise<unknown>;
  onEvent(listener: DebuggerEventListener): void;
  onDetach(listener: DebuggerDetachListener): void;
}

export interface TabsApi {
  get(tabId: number): Promise<TabSnapshot | undefined>;
  remove(tabId: number): Promise<void>;
  activate(tabId: number): Promise<void>;
  /** Ids of every tab of the profile; only the popup fence uses it, to leave them all alone. */
  allIds(): Promise<number[]>;
  /** Ids of the tabs showing exactly `url` (or about to: their pending URL). */
  withUrl(url: string): Promise<number[]>;
  /** Tabs whose navigation is pending while the tab reports itself complete (stalled at start-up). */
  stalled(): Promise<{ readonly id: number; readonly pendingUrl: string }[]>;
  /** Loads `url` in the tab (used only to resume a stalled start-up navigation). */
  navigate(tabId: number, url: string): Promise<void>;
  /** Reloads the tab (used only for a person's tab the popup fence stopped by mistake). */
  reload(tabId: number): Promise<void>;
  onCreated(listener: (tab: TabSnapshot) => void): void;
  onRemoved(listener: (tabId: number) => void): void;
  /** A tab's URL changed (Chrome's `tabs.onUpdated` with a `url` in its change info). */
  onUrlChanged(listener: (tabId: number, url: string) => void): void;
}

/**
 * chrome.webNavigation: a tab or window a page opened, with the tab that opened it even when the
 * popup has no opener (`noopener`), and the URL it is about to load.
 */
export interface NavigationApi {
  onCreatedNavigationTarget(listener: (sourceTabId: number, tabId: number, url: string) => void): void;
  /** A tab's main-frame navigation failed with `net::ERR_BLOCKED_BY_CLIENT`. */
  onMainFrameBlocked(listener: (tabId: number) => void): void;
}

export interface WindowsApi {
  /** Opens `about:blank` in a new unfocused window and returns its one tab. */
  createUnfocusedBlank(): Promise<TabSnapshot>;
  /** Opens `url` (an about:blank URL) in a new unfocused window and returns its one tab. */
  createUnfocused(url: string): Promise<TabSnapshot>;
}

/** A key-value storage area (chrome.storage.local, .session or .managed). */
export interface StorageArea {
  get(keys: readonly string[]): Promise<Record<string, unknown>>;
  set(items: Record<string, unknown>): Promise<void>;
  remove(keys: readonly string[]): Promise<void>;
}

export interface StorageApi {
  readonly local: StorageArea;
  readonly session: StorageArea;
  /** Read-only in practice: Chrome enterprise policy writes it. */
  readonly managed: Pick<StorageArea, "get">;
  onChanged(listener: (areaName: string, keys: readonly string[]) => void): void;
}

export type PanelMessageListener = (message: unknown, reply: (response: unknown) => void) => void;

export interface RuntimeApi {
  readonly extensionVersion: string;
  /** Messages from the extension's own pages (options, popup). */
  onMessage(listener: PanelMessageListener): void;
  onStartup(listener: () => void): void;
}

export interface AlarmsApi {
  create(name: string, periodInMinutes: number): Promise<void>;
  onAlarm(listener: (name: string) => void): void;
}

export interface PermissionsApi {
  /** Whether the extension may fetch from this origin (host permission or a loopback grant). */
  containsOrigin(origin: string): Promise<boolean>;
}

/**
 * One declarativeNetRequest session rule that blocks main-frame requests started by a document
 * on one of `initiatorDomains` (or a subdomain) in every tab except `excludedTabIds`. Requests
 * without an initiator (typed, bookmarks, `chrome.tabs.create`) never match.
 */
export interface MainFrameBlockRule {
  readonly id: number;
  readonly excludedTabIds: readonly number[];
  readonly initiatorDomains: readonly string[];
}

export interface NetRulesApi {
  /** Whether the browser offers declarativeNetRequest session rules to this extension. */
  readonly available: boolean;
  /** Installs or replaces the rule (one `updateSessionRules` call, atomic in Chrome). */
  putMainFrameBlock(rule: MainFrameBlockRule): Promise<void>;
  remove(ruleId: number): Promise<void>;
}

export interface ChromeFacade {
  readonly debugger: DebuggerApi;
  readonly tabs: TabsApi;
  readonly windows: WindowsApi;
  readonly storage: StorageApi;
  readonly runtime: RuntimeApi;
  readonly alarms: AlarmsApi;
  readonly permissions: PermissionsApi;
  readonly netRules: NetRulesApi;
  readonly navigation: NavigationApi;
}
