/**
 * The service worker's side of the panel: answers PanelRequests. Requests are untrusted input
 * (even from our own pages), so each field is checked here, and enrollment goes through the same
 * validation as a policy.
 */
import type { ChromeFacade } from "../chrome/facade";
import { saveLocalEnrollment, viewOf } from "../config/enrollment";
import { DEVICE_TAB_CAPACITY } from "../constants";
import type { ProfileClient } from "../profile/profileClient";
import type { PanelRequest, PanelResponse, PanelStatus } from "./messages";

function isRequest(message: unknown): message is PanelRequest {
  return typeof message === "object" && message !== null && typeof (message as { type?: unknown }).type === "string";
}

export class PanelService {
  constructor(
    private readonly chrome: ChromeFacade,
    private readonly profile: ProfileClient,
  ) {}

  async status(): Promise<PanelStatus> {
    const loaded = this.profile.enrollment;
    const origin = loaded.config?.serviceOrigin;
    let hostPermission: boolean | undefined;
    if (origin !== undefined) {
      try {
        hostPermission = await this.chrome.permissions.containsOrigin(origin);
      } catch {
        hostPermission = undefined;
      }
    }
    const lastError = this.profile.lastErrorCode;
    const browserEpoch = this.profile.browserEpoch;
    const connectionEpoch = this.profile.connectionEpoch;
    return {
      connection: this.profile.connectionState,
      enrollment: viewOf(loaded),
      sessions: this.profile.manager.views(),
      capacity: { total: DEVICE_TAB_CAPACITY, free: this.profile.manager.freeCapacity() },
      health: this.profile.health.snapshot(),
      ...(lastError === undefined ? {} : { lastError }),
      ...(browserEpoch === undefined ? {} : { browserEpoch }),
      ...(connectionEpoch === undefined ? {} : { connectionEpoch }),
      ...(hostPermission === undefined ? {} : { hostPermission }),
    };
  }

  async handle(message: unknown): Promise<PanelResponse> {
    await this.profile.start();
    if (!isRequest(message)) return { ok: false, error: "Unknown request." };
    switch (message.type) {
      case "get_status":
        return { ok: true, status: await this.status() };
      case "save_enrollment": {
        if (this.profile.enrollment.source === "managed") return this.refuse("Enterprise policy manages this device; local changes are not allowed.");
        const form = message.form;
        const result = await saveLocalEnrollment(this.chrome.storage, {
          serviceOrigin: form.serviceOrigin,
          deviceId: form.deviceId,
          credential: form.credential,
          enabled: form.enabled === true,
          localOriginPolicy: form.policyMode === "allowlist" ? { mode: "allowlist", origins: [...form.policyOrigins] } : { mode: "any" },
        });
        if (!result.ok) return this.refuse(result.problems.join(" "));
        await this.profile.reloadConfig();
        return { ok: true, status: await this.status() };
      }
      case "set_enabled": {
        const config = this.profile.enrollment.config;
        if (this.profile.enrollment.source !== "local" || config === undefined) {
          return this.refuse("Only a local enrollment can be enabled or disabled here.");
        }
        const result = await saveLocalEnrollment(this.chrome.storage, { ...config, enabled: message.enabled === true });
        if (!result.ok) return this.refuse(result.problems.join(" "));
        await this.profile.reloadConfig();
        return { ok: true, status: await this.status() };
      }
      case "attach_tab": {
        if (typeof message.sessionId !== "string" || !Number.isSafeInteger(message.tabId)) return this.refuse("Pick a tab and enter a session id.");
        const outcome = await this.profile.attachRequests.attach(message.sessionId, message.tabId);
        return outcome.ok ? { ok: true, status: await this.status() } : this.refuse(outcome.message);
      }
      case "detach_session": {
        if (typeof message.sessionId !== "string") return this.refuse("Name the session to detach.");
        const runtime = this.profile.manager.bySessionId(message.sessionId);
        if (runtime?.mode !== "attended") return this.refuse("Only an attended session can be detached from the panel.");
        this.profile.manager.detachByUser(message.sessionId);
        return { ok: true, status: await this.status() };
      }
      default: {
        const unreachable: never = message;
        return this.refuse(`Unknown request ${String(unreachable)}.`);
      }
    }
  }

  private async refuse(error: string): Promise<PanelResponse> {
    return { ok: false, error, status: await this.status() };
  }
}
