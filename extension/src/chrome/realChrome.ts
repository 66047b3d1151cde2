/**
 * The ChromeFacade over the real chrome.* APIs. Listener registration happens synchronously when
 * a method is called, so callers must register at service-worker start-up (Chrome only wakes a
 * stopped worker for listeners registered in its first turn).
 */
import { CDP_PROTOCOL_VERSION } from "../constants";
import type { CdpTarget, ChromeFacade, StorageArea, TabSnapshot } from "./facade";

function snapshot(tab: chrome.tabs.Tab): TabSnapshot | undefined {
  if (tab.id === undefined) return undefined;
  const result: TabSnapshot = {
    id: tab.id,
    windowId: tab.windowId,
    url: tab.url ?? tab.pendingUrl ?? "",
    title: tab.title ?? "",
    active: tab.active,
    ...(tab.openerTabId === undefined ? {} : { openerTabId: tab.openerTabId }),
    ...(tab.pendingUrl === undefined ? {} : { pendingUrl: tab.pendingUrl }),
  };
  return result;
}

async function createUnfocused(url: string): Promise<TabSnapshot> {
  const window = await chrome.windows.create({ focused: false, url });
  const tab = window?.tabs?.[0];
  const snap = tab === undefined ? undefined : snapshot(tab);
  if (snap === undefined) throw new Error("chrome.windows.create returned no tab");
  return snap;
}

function area(storageArea: chrome.storage.StorageArea): StorageArea {
  return {
    get: (keys) => storageArea.get<Record<string, unknown>>([...keys]),
    set: (items) => storageArea.set(items),
    remove: (keys) => storageArea.remove([...keys]),
  };
}

function debuggee(target: CdpTarget): chrome.debugger.DebuggerSession {
  return target.sessionId === undefined
    ? { tabId: target.tabId }
    : { tabId: target.tabId, sessionId: target.sessionId };
}

/** Builds the facade over the global `chrome` object. */
export function realChrome(): ChromeFacade {
  return {
    debugger: {
      attach: (tabId) => chrome.debugger.attach({ tabId }, CDP_PROTOCOL_VERSION),
      detach: (tabId) => chrome.debugger.detach({ tabId }),
      sendCommand: (target, method, params) =>
        chrome.debugger.sendCommand(debuggee(target), method, params as Record<string, unknown>),
      onEvent: (listener) => {
        chrome.debugger.onEvent.addListener((source, method, params) => {
          if (source.tabId === undefined) return;
          const target: CdpTarget =
            source.sessionId === undefined
              ? { tabId: source.tabId }
              : { tabId: source.tabId, sessionId: source.sessionId };
          listener(target, method, params);
        });
      },
      onDetach: (listener) => {
        chrome.debugger.onDetach.addListener((source, reason) => {
          if (source.tabId !== undefined) listener(source.tabId, reason);
        });
      },
    },
    tabs: {
      get: async (tabId) => {
        try {
          return snapshot(await chrome.tabs.get(tabId));
        } catch {
          return undefined;
        }
      },
      remove: (tabId) => chrome.tabs.remove(tabId),
      allIds: async () => (await chrome.tabs.query({})).flatMap((tab) => (tab.id === undefined ? [] : [tab.id])),
      // about: URLs fit no match pattern, so every tab is listed and compared here.
      withUrl: async (url) => (await chrome.tabs.query({})).flatMap((tab) => (tab.id !== undefined && (tab.url === url || tab.pendingUrl === url) ? [tab.id] : [])),
      stalled: async () =>
        (await chrome.tabs.query({ status: "complete" })).flatMap((tab) =>
          tab.id === undefined || tab.pendingUrl === undefined || tab.pendingUrl === "" ? [] : [{ id: tab.id, pendingUrl: tab.pendingUrl }],
        ),
      navigate: async (tabId, url) => {
        await chrome.tabs.update(tabId, { url });
      },
      reload: (tabId) => chrome.tabs.reload(tabId),
      activate: async (tabId) => {
        await chrome.tabs.update(tabId, { active: true });
      },
      onCreated: (listener) => {
        chrome.tabs.onCreated.addListener((tab) => {
          const snap = snapshot(tab);
          if (snap !== undefined) listener(snap);
        });
      },
      onRemoved: (listener) => {
        chrome.tabs.onRemoved.addListener((tabId) => {
          listener(tabId);
        });
      },
      onUrlChanged: (listener) => {
        chrome.tabs.onUpdated.addListener((tabId, changeInfo) => {
          if (changeInfo.url !== undefined) listener(tabId, changeInfo.url);
        });
      },
    },
    windows: {
      createUnfocusedBlank: () => createUnfocused("about:blank"),
      createUnfocused: (url) => createUnfocused(url),
    },
    storage: {
      local: area(chrome.storage.local),
      session: area(chrome.storage.session),
      managed: area(chrome.storage.managed),
      onChanged: (listener) => {
        chrome.storage.onChanged.addListener((changes, areaName) => {
          listener(areaName, Object.keys(changes));
        });
      },
    },
    runtime: {
      extensionVersion: chrome.runtime.getManifest().version,
      onMessage: (listener) => {
        chrome.runtime.onMessage.addListener((message, sender, sendResponse) => {
          // Only the extension's own pages (options, popup) may talk to the service worker. There
          // are no content scripts and no externally_connectable, so this is defence in depth.
          const ownPages = `chrome-extension://${chrome.runtime.id}/`;
          if (sender.id !== chrome.runtime.id || !(sender.url ?? "").startsWith(ownPages)) return false;
          listener(message, sendResponse);
          return true;
        });
      },
      onStartup: (listener) => {
        chrome.runtime.onStartup.addListener(listener);
      },
    },
    alarms: {
      create: (name, periodInMinutes) => chrome.alarms.create(name, { periodInMinutes }),
      onAlarm: (listener) => {
        chrome.alarms.onAlarm.addListener((alarm) => {
          listener(alarm.name);
        });
      },
    },
    permissions: {
      containsOrigin: (origin) => chrome.permissions.contains({ origins: [`${origin}/*`] }),
    },
    navigation: {
      onCreatedNavigationTarget: (listener) => {
        chrome.webNavigation.onCreatedNavigationTarget.addListener((details) => {
          listener(details.sourceTabId, details.tabId, details.url);
        });
      },
      onMainFrameBlocked: (listener) => {
        chrome.webNavigation.onErrorOccurred.addListener((details) => {
          if (details.frameId === 0 && details.error === "net::ERR_BLOCKED_BY_CLIENT") listener(details.tabId);
        });
      },
    },
    netRules: {
      available: typeof chrome.declarativeNetRequest?.updateSessionRules === "function",
      putMainFrameBlock: (rule) =>
        chrome.declarativeNetRequest.updateSessionRules({
          removeRuleIds: [rule.id],
          addRules: [
            {
              id: rule.id,
              priority: 1,
              action: { type: chrome.declarativeNetRequest.RuleActionType.BLOCK },
              condition: {
                resourceTypes: [chrome.declarativeNetRequest.ResourceType.MAIN_FRAME],
                excludedTabIds: [...rule.excludedTabIds],
                initiatorDomains: [...rule.initiatorDomains],
              },
            },
          ],
        }),
      remove: (ruleId) => chrome.declarativeNetRequest.updateSessionRules({ removeRuleIds: [ruleId] }),
    },
  };
}
