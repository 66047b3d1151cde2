/**
 * The browser epoch: a random id kept in chrome.storage.session. It survives service-worker
 * eviction and disappears on a browser or extension restart, so a missing value means a new epoch.
 */
import type { StorageArea } from "../chrome/facade";

export const BROWSER_EPOCH_KEY = "browserEpoch";

export interface BrowserEpochState {
  readonly epoch: string;
  /** True when this call drew the epoch: the browser or the extension restarted. */
  readonly isNew: boolean;
}

/** Reads the current epoch, drawing and persisting a new one when storage has none. */
export async function loadBrowserEpoch(session: StorageArea, newId: () => string): Promise<BrowserEpochState> {
  const stored = (await session.get([BROWSER_EPOCH_KEY]))[BROWSER_EPOCH_KEY];
  if (typeof stored === "string" && stored !== "") return { epoch: stored, isNew: false };
  const epoch = newId();
  await session.set({ [BROWSER_EPOCH_KEY]: epoch });
  return { epoch, isNew: true };
}
