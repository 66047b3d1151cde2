/**
 * The popup fence: while at least one tab is controlled, a declarativeNetRequest session rule
 * blocks every main-frame request of every tab that is not known to be someone else's, so a
 * popup of a controlled tab is refused inside the network stack before its first request leaves.
 *
 * Why a rule and not a listener: `tabs.onCreated` and `webNavigation.onCreatedNavigationTarget`
 * arrive about 15 ms before a noopener popup's first request is sent, but they are asynchronous;
 * closing the tab from there lost the race every time (measured on Chromium 156, see
 * extension/README.md). A session rule is evaluated synchronously before a request starts.
 *
 * A popup's tab id cannot be known before it exists, so the rule names the tabs it must leave
 * alone (`excludedTabIds`): every tab that existed when the fence went up, the controlled tabs,
 * and every later tab that is not a popup of a controlled tab, added when `tabs.onCreated`
 * reports it. The trade-off: a tab a person opens *from a link* while a session runs is created
 * by Chrome with its first request already under way, so that request can meet the rule before
 * the tab is added, and the tab then shows Chromium's block page once (a reload loads it). Tabs
 * that existed before, typed URLs and bookmarks in a new tab (which starts at the New Tab page)
 * are never affected. With no controlled tab the rule is removed.
 */
import type { NetRulesApi, TabsApi } from "../chrome/facade";
import type { PopupContainmentByKind } from "../generated/wire";
import type { Logger } from "../log";
import { SerialChain } from "./serialChain";

/** The one session rule id this extension uses. */
export const POPUP_FENCE_RULE_ID = 1;
/** `chrome.tabs.TAB_ID_NONE`: requests outside any tab (the extension's own fetches, prefetches). */
export const TAB_ID_NONE = -1;

/**
 * How each kind of popup is contained when the fence is up, as measured on Chromium 156 with
 * counting servers (zero requests for every kind). Popups that keep their opener start at
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
  middle_click: "closed_after_request",
  modifier_click: "closed_after_request",
  keyboard_activation: "closed_after_request",
};

export class PopupFence {
  /** Tabs whose main-frame requests the rule lets through; meaningful only while `up`. */
  private readonly spared = new Set<number>();
  private up = false;
  private failed = false;
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
   * Puts the rule up, sparing every tab that exists now; resolves once Chrome installed it. Call
   * before a tab becomes controlled. Idempotent while up.
   */
  raise(): Promise<void> {
    return this.chain.run(async () => {
      if (this.up || !this.rules.available) return;
      const ids = await this.tabs.allIds();
      this.spared.clear();
      for (const id of ids) this.spared.add(id);
      this.up = true;
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
      if (!this.up) return;
      this.up = false;
      this.spared.clear();
      try {
        await this.rules.remove(POPUP_FENCE_RULE_ID);
      } catch {
        this.log.warn("popup_fence_remove_failed");
      }
    });
  }

  private async install(): Promise<void> {
    try {
      await this.rules.putMainFrameBlock({ id: POPUP_FENCE_RULE_ID, excludedTabIds: [TAB_ID_NONE, ...this.spared] });
      this.failed = false;
    } catch {
      // The hello then says `closed_after_request` for the kinds only the rule stops.
      this.failed = true;
      this.log.warn("popup_fence_install_failed");
    }
  }
}
