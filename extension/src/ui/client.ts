/** Sends PanelRequests from the extension's pages to the service worker. */
import type { PanelRequest, PanelResponse } from "../panel/messages";

export async function request(message: PanelRequest): Promise<PanelResponse> {
  try {
    const response = await chrome.runtime.sendMessage<PanelRequest, PanelResponse | undefined>(message);
    return response ?? { ok: false, error: "The service worker did not answer; reload the extension." };
  } catch {
    return { ok: false, error: "The service worker is not reachable; reload the extension." };
  }
}
