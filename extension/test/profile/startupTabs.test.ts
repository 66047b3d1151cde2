import { describe, expect, it } from "vitest";

import { RedactingLogger } from "../../src/log";
import { resumeStalledTabs } from "../../src/profile/startupTabs";
import { FakeChrome } from "../fakes/fakeChrome";

describe("stalled start-up tabs", () => {
  it("re-issues the pending navigation of a stalled tab once, and leaves every other tab alone", async () => {
    const chrome = new FakeChrome();
    const lines: string[] = [];
    const log = new RedactingLogger((_level, line) => lines.push(line));
    const stalled = chrome.openTab("", { pendingUrl: "https://mail.example.com/inbox" });
    const loading = chrome.openTab("", { pendingUrl: "https://news.example.com/" });
    const controlled = chrome.openTab("", { pendingUrl: "https://example.com/" });
    const internal = chrome.openTab("", { pendingUrl: "chrome://settings/" });
    chrome.openTab("https://loaded.example.com/");
    for (const tab of [stalled, controlled, internal]) chrome.stalledTabs.add(tab.id);

    expect(await resumeStalledTabs(chrome.tabs, (id) => id === controlled.id, log)).toBe(1);
    expect(chrome.navigatedTabs).toEqual([{ tabId: stalled.id, url: "https://mail.example.com/inbox" }]);
    expect(await resumeStalledTabs(chrome.tabs, (id) => id === controlled.id, log)).toBe(0);
    expect(chrome.navigatedTabs).toHaveLength(1);
    expect(loading.id).toBeGreaterThan(0);
    expect(lines.join("\n")).not.toContain("mail.example.com");
  });
});
