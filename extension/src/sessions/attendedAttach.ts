/**
 * Attended attach: a person picks one tab of the current window in the panel and names the
 * session. The extension asks the backend (`attach_request`), and on `attach_result attached`
 * attaches CDP to exactly that tab. Detaching later never closes it.
 */
import type { ChromeFacade } from "../chrome/facade";
import { ABOUT_BLANK, OriginPolicy } from "../config/origins";
import { ATTACH_RESULT_TIMEOUT_MS } from "../constants";
import type { DeviceClientFrame, DeviceServerAttachResult, LocalOriginPolicy } from "@understudy/protocol";
import type { Logger } from "../log";
import type { SessionManager } from "./sessionManager";

export type AttachOutcome = { ok: true } | { ok: false; message: string };

export interface AttachDeps {
  readonly chrome: ChromeFacade;
  readonly manager: SessionManager;
  readonly log: Logger;
  sendDevice(frame: DeviceClientFrame): boolean;
  newId(): string;
  browserEpoch(): string;
  localPolicy(): LocalOriginPolicy;
  enabled(): boolean;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export class AttachRequests {
  private readonly pending = new Map<string, (result: DeviceServerAttachResult | undefined) => void>();

  constructor(private readonly deps: AttachDeps) {}

  /** Routes the backend's answer to the waiting request. */
  onResult(frame: DeviceServerAttachResult): void {
    const resolve = this.pending.get(frame.requestId);
    if (resolve === undefined) {
      this.deps.log.warn("attach_result_unexpected");
      return;
    }
    this.pending.delete(frame.requestId);
    // Synchronously, before the next frame (the session ticket) is handled.
    if (frame.outcome === "attached" && frame.leaseId !== undefined) this.deps.manager.expectAttach(frame.leaseId);
    resolve(frame);
  }

  async attach(sessionId: string, tabId: number): Promise<AttachOutcome> {
    const { manager, chrome } = this.deps;
    const sessionKey = sessionId.trim().toLowerCase();
    if (!UUID.test(sessionKey)) return { ok: false, message: "Enter the session id (a UUID) that the application shows for this session." };
    if (!this.deps.enabled()) return { ok: false, message: "The device is disabled; enable it in the options page first." };
    if (manager.isControlledTab(tabId)) return { ok: false, message: "This tab is already controlled by a session." };
    if (manager.spare.isSpareTab(tabId)) return { ok: false, message: "This tab is the extension's spare window, kept ready for the next session; open a page in another tab." };
    if (manager.bySessionId(sessionKey) !== undefined) return { ok: false, message: "That session already controls a tab on this device." };
    if (manager.freeCapacity() === 0) return { ok: false, message: "This device already controls two tabs; close a session first." };
    const tab = await chrome.tabs.get(tabId);
    if (tab === undefined) return { ok: false, message: "The tab is gone; pick a tab and try again." };
    if (!new OriginPolicy(undefined, this.deps.localPolicy()).allowsUrl(tab.url === "" ? ABOUT_BLANK : tab.url)) {
      return { ok: false, message: "This tab shows a page outside the device's local origin policy; navigate it to an allowed origin first." };
    }
    const requestId = this.deps.newId();
    const answer = new Promise<DeviceServerAttachResult | undefined>((resolve) => {
      const timer = setTimeout(() => {
        this.pending.delete(requestId);
        resolve(undefined);
      }, ATTACH_RESULT_TIMEOUT_MS);
      this.pending.set(requestId, (result) => {
        clearTimeout(timer);
        resolve(result);
      });
    });
    const sent = this.deps.sendDevice({ type: "attach_request", requestId, sessionId: sessionKey, tabId, browserEpoch: this.deps.browserEpoch() });
    if (!sent) {
      this.pending.get(requestId)?.(undefined);
      this.pending.delete(requestId);
      await answer;
      return { ok: false, message: "The extension is not connected to the service; check the connection status, then retry." };
    }
    const result = await answer;
    if (result === undefined) return { ok: false, message: "The service did not answer in time; retry." };
    if (result.outcome !== "attached" || result.leaseId === undefined || result.leaseEpoch === undefined) {
      if (result.leaseId !== undefined) manager.abandonAttach(result.leaseId);
      return { ok: false, message: result.error?.message ?? "The service refused the attach request." };
    }
    try {
      return await this.complete(sessionKey, tabId, result.leaseId, result.leaseEpoch, result.allowedOrigins);
    } finally {
      manager.abandonAttach(result.leaseId);
    }
  }

  private async complete(sessionId: string, tabId: number, leaseId: string, leaseEpoch: number, allowedOrigins: string[] | undefined): Promise<AttachOutcome> {
    const release = (reason: "detached_by_user" | "debugger_detached" | "tab_closed"): void => {
      this.deps.sendDevice({ type: "lease_released", leaseId, leaseEpoch, reason });
    };
    const tab = await this.deps.chrome.tabs.get(tabId);
    if (tab === undefined) {
      release("tab_closed");
      return { ok: false, message: "The tab closed while attaching." };
    }
    // An attended session has no origin list of its own: the backend sends it empty (as the
    // session status shows it) or leaves it out, and the device's local policy alone applies.
    const sessionOrigins = allowedOrigins !== undefined && allowedOrigins.length > 0 ? allowedOrigins : undefined;
    if (!new OriginPolicy(sessionOrigins, this.deps.localPolicy()).allowsUrl(tab.url === "" ? ABOUT_BLANK : tab.url)) {
      release("detached_by_user");
      return { ok: false, message: "This tab shows an origin the session does not allow; navigate it to an allowed origin, then attach again." };
    }
    try {
      await this.deps.manager.attachTab({
        leaseId,
        sessionId,
        leaseEpoch,
        tabId,
        mode: "attended",
        ...(sessionOrigins === undefined ? {} : { allowedOrigins: sessionOrigins }),
        generation: 1,
        browserEpoch: this.deps.browserEpoch(),
      });
    } catch {
      release("debugger_detached");
      return { ok: false, message: "Chrome refused to attach to this tab (internal pages cannot be controlled); pick a web page tab." };
    }
    return { ok: true };
  }
}
