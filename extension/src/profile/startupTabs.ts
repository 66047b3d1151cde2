/**
 * Resumes tabs Chromium left stalled at browser start-up. Measured on Chromium 156 (headless,
 * `--load-extension`): with the `declarativeNetRequest` permission (needed by the popup fence,
 * see sessions/popupFence.ts) a tab that starts loading while the browser starts is, in most
 * runs, left with its first navigation pending for good (`status: "complete"` with a
 * `pendingUrl`, nothing sent). Without the permission it always loads. The extension has no rule
 * installed then, so nothing of its own holds the request; re-issuing the same navigation loads
 * the page, with its one request. Only tabs in exactly that state are touched, and only in the
 * first seconds of a new browser epoch.
 */
import type { TabsApi } from "../chrome/facade";
import type { Logger } from "../log";

/** When to look after a new browser epoch starts: a stalled tab settles into that state late. */
export const STARTUP_TAB_CHECKS_MS: readonly number[] = [0, 1_000, 3_000, 6_000, 10_000];

/** Re-issues the pending navigation of every stalled http(s) tab that `skip` does not exclude. */
export async function resumeStalledTabs(tabs: TabsApi, skip: (tabId: number) => boolean, log: Logger): Promise<number> {
  let resumed = 0;
  for (const tab of await tabs.stalled()) {
    if (skip(tab.id) || !/^https?:/.test(tab.pendingUrl)) continue;
    try {
      await tabs.navigate(tab.id, tab.pendingUrl);
      resumed += 1;
    } catch {
      log.warn("stalled_tab_resume_failed");
    }
  }
  if (resumed > 0) log.info("stalled_tabs_resumed", { count: resumed });
  return resumed;
}

/** Runs `resumeStalledTabs` at each of `STARTUP_TAB_CHECKS_MS`. */
export function scheduleStartupTabChecks(tabs: TabsApi, skip: (tabId: number) => boolean, log: Logger): void {
  for (const delay of STARTUP_TAB_CHECKS_MS) {
    setTimeout(() => {
      resumeStalledTabs(tabs, skip, log).catch(() => {
        log.warn("stalled_tab_check_failed");
      });
    }, delay);
  }
}
