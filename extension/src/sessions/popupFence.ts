/**
 * The popup fence: while at least one tab is controlled, a declarativeNetRequest session rule
 * refuses every main-frame request that a document on a host of a controlled tab starts in a tab
 * that is not known to be someone else's, so a popup of a controlled tab is refused inside the
 * network stack before its first request leaves.
 *
 * Why a rule and not a listener: `tabs.onCreated` and `webNavigation.onCreatedNavigationTarget`
 * arrive about 15 ms before a noopener popup's first request is sent, but they are asynchronous;
 * closing the tab from there lost the race every time (measured on Chromium 156, see
 * extension/README.md). A session rule is evaluated synchronously before a request starts.
 *
 * A popup's tab id cannot be known before it exists, so the rule names the tabs it leaves alone
 * (`excludedTabIds`): every tab that existed when the fence went up and every later tab that
 * `tabs.onCreated` reports and is not a popup of a controlled tab. And it matches only requests
 * whose initiator is on a host a controlled tab's documents or frames were admitted to
 * (`initiatorDomains`): a popup's first request always carries its opener's (or its frame's)
 * origin, while a tab the browser opens itself (a typed URL, a bookmark, `chrome.tabs.create`,
 * another program) carries none and never matches, even before `tabs.onCreated` spared it.
 *
 * The trade-off: a tab a person opens *from a link on one of those hosts* while a session runs
 * starts loading before `tabs.onCreated` spares it, so its first request is refused; the session
 * manager then reloads it once the rule spares it (the refused request never left). Tabs that existed before are never
 * affected. Not covered: popups whose opener has an opaque origin (a sandboxed or `data:` frame
 * with `allow-popups`), since a rule cannot name an opaque initiator; `tabs.onCreated` closes
 * those after their first request. With no controlled tab the rule is removed.
 */
import type { NetRulesApi, TabsApi } from "../chrome/facade";
import type { PopupContainmentByKind } from "@understudy/protocol";
import type { Logger } from "../log";
import { SerialChain } from "./serialChain";

/** The one session rule id this extension uses. */
export const POPUP_FENCE_RULE_ID = 1;
/** `chrome.tabs.TAB_ID_NONE`: requests outside any tab (the extension's own fetches, prefetches). */
export const TAB_ID_NONE = -1;
/** Hosts a rule can name: DNS names and IPv4 addresses (IPv6 literals are left out). */
const RULE_HOST = /^[a-z0-9.-]{1,253}$/;

/** The host of an http(s) URL a rule can name, or undefined (about:, data:, IPv6, garbage). */
export function ruleHostOf(url: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return undefined;
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") return undefined;
  return RULE_HOST.test(parsed.hostname) ? parsed.hostname : undefined;
}

/**
 * How each kind of popup is contained when the fence is up, as measured on Chromium 156 with
 * counting servers (zero requests for every kind but `opaque_origin_popup`). Popups that keep their opener start at
 * about:blank, so `tabs.onCreated` closes them before they request anything; the rule would
 * refuse their first request too.
 */
export const CONTAINMENT_WITH_FENCE: PopupContainmentByKind = {
  window_open: "closed_before_request",
  window_open_noopener: "blocked_before_request",
  link_target_blank: "blocked_before_request",
  link_noopener: "blocked_before_request",
  link_noreferrer: "blocked_before_request",
  link_named_target: "closed_before_request",
  area_target: "blocked_before_request",
  form_target_get: "blocked_before_request",
  form_target_post: "blocked_before_request",
  iframe_popup: "blocked_before_request",
  // The rule cannot name an opaque initiator; measured: one request reaches the server.
  opaque_origin_popup: "closed_after_request",
  middle_click: "blocked_before_request",
  modifier_click: "blocked_before_request",
  keyboard_activation: "blocked_before_request",
};

/**
 * Without the rule (no declarativeNetRequest, or installing it failed) only `tabs.onCreated` is
 * left: it loses the race for every popup that starts loading its URL at once.
 */
export const CONTAINMENT_WITHOUT_FENCE: PopupContainmentByKind = {
  window_open: "closed_before_request",
  window_open_noopener: "closed_after_request",
  link_target_blank: "closed_after_request",
  link_noopener: "closed_after_request",
  link_noreferrer: "closed_after_request",
  link_named_target: "closed_before_request",
  area_target: "closed_after_request",
  form_target_get: "closed_after_request",
  form_target_post: "closed_after_request",
  iframe_popup: "closed_after_request",
  opaque_origin_popup: "closed_after_request",
  middle_click: "closed_after_request",
  modifier_click: "closed_after_request",
  keyboard_activation: "closed_after_request",
};

export class PopupFence {
  /** Tabs whose main-frame requests the rule lets through; meaningful only while `up`. */
  private readonly spared = new Set<number>();
  /**
   * Hosts documents of controlled tabs were admitted to while the fence is up: the initiators the
   * rule matches. Kept until the fence comes down (a host a tab left may still have a frame).
   */
  private readonly hosts = new Set<string>();
  private up = false;
  private failed = false;
  /**
   * Session rules outlive the service worker: a worker that starts knows nothing of the rule an
   * earlier one left, so the first `lower` removes it even though this one never raised it.
   */
  private ruleMayLinger = true;
  private readonly chain = new SerialChain();

  constructor(
    private readonly rules: NetRulesApi,
    private readonly tabs: TabsApi,
    private readonly log: Logger,
  ) {}

  /** How popups are contained right now, for the device hello. */
  containment(): PopupContainmentByKind {
    return this.rules.available && !this.failed ? CONTAINMENT_WITH_FENCE : CONTAINMENT_WITHOUT_FENCE;
  }

  get isUp(): boolean {
    return this.up;
  }

  /**
   * Puts the fence up, sparing every tab that exists now, and admits the origins a new controlled
   * tab may show; resolves once Chrome installed the rule. Call before a tab becomes controlled.
   */
  raise(origins: readonly string[] = []): Promise<void> {
    return this.chain.run(async () => {
      if (!this.rules.available) return;
      if (!this.up) {
        const ids = await this.tabs.allIds();
        this.spared.clear();
        this.hosts.clear();
        for (const id of ids) this.spared.add(id);
        this.up = true;
      }
      for (const origin of origins) {
        const host = ruleHostOf(origin);
        if (host !== undefined) this.hosts.add(host);
      }
      await this.install();
    });
  }

  /**
   * A document of a controlled tab (its page or a frame) is about to load from `url`: its host
   * joins the rule's initiators first, so a popup it opens meets the rule. Resolves at once for a
   * host already in.
   */
  admit(url: string): Promise<void> {
    const host = ruleHostOf(url);
    if (!this.up || host === undefined || this.hosts.has(host)) return Promise.resolve();
    return this.chain.run(async () => {
      if (!this.up || this.hosts.has(host)) return;
      this.hosts.add(host);
      await this.install();
    });
  }

  /** A tab that is not a popup of a controlled tab appeared: spare it. */
  spare(tabId: number): Promise<void> {
    return this.chain.run(async () => {
      if (!this.up || this.spared.has(tabId)) return;
      this.spared.add(tabId);
      await this.install();
    });
  }

  /** A tab closed: its id is never reused by Chrome, so it only leaves the list. */
  forget(tabId: number): void {
    this.spared.delete(tabId);
  }

  /** No tab is controlled any more: take the rule down. */
  lower(): Promise<void> {
    return this.chain.run(async () => {
      if (!this.up && !this.ruleMayLinger) return;
      this.up = false;
      this.ruleMayLinger = false;
      this.spared.clear();
      this.hosts.clear();
      try {
        await this.rules.remove(POPUP_FENCE_RULE_ID);
      } catch {
        this.log.warn("popup_fence_remove_failed");
      }
    });
  }

  private async install(): Promise<void> {
    try {
      // A rule needs at least one initiator domain; with none, no document could open a popup yet.
      if (this.hosts.size === 0) await this.rules.remove(POPUP_FENCE_RULE_ID);
      else await this.rules.putMainFrameBlock({ id: POPUP_FENCE_RULE_ID, excludedTabIds: [TAB_ID_NONE, ...this.spared], initiatorDomains: [...this.hosts].sort() });
      this.failed = false;
    } catch {
      // The hello then says `closed_after_request` for the kinds only the rule stops.
      this.failed = true;
      this.log.warn("popup_fence_install_failed");
    }
  }
}
