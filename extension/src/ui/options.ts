/**
 * Options page: the enrollment form and the full status. The credential field is write-only: it
 * is never filled from storage, and it is cleared as soon as the service worker saved it.
 */
import type { EnrollmentForm, PanelResponse, PanelStatus } from "../panel/messages";
import { request } from "./client";
import { byId, showMessage, spawn } from "./dom";
import { renderStatus } from "./status";

const form = byId<HTMLFormElement>("enrollment");
const serviceOrigin = byId<HTMLInputElement>("serviceOrigin");
const deviceId = byId<HTMLInputElement>("deviceId");
const credential = byId<HTMLInputElement>("credential");
const enabled = byId<HTMLInputElement>("enabled");
const policyAllowlist = byId<HTMLInputElement>("policyAllowlist");
const policyAny = byId<HTMLInputElement>("policyAny");
const policyOrigins = byId<HTMLTextAreaElement>("policyOrigins");
const message = byId<HTMLElement>("message");
const statusBox = byId<HTMLElement>("status");
const source = byId<HTMLElement>("source");
let filledOnce = false;

function fill(status: PanelStatus): void {
  const view = status.enrollment;
  const managed = view.source === "managed";
  source.textContent = managed
    ? "Enterprise policy is in force; these fields are read-only."
    : view.source === "local"
      ? "The enrollment saved in this browser is in force."
      : "Not enrolled yet.";
  for (const input of form.querySelectorAll<HTMLInputElement | HTMLTextAreaElement | HTMLButtonElement>("input, textarea, button")) {
    input.disabled = managed;
  }
  credential.placeholder = view.credentialSet ? "Saved. Leave blank to keep it, or paste a new one." : "Paste the device credential";
  if (!filledOnce) {
    serviceOrigin.value = view.serviceOrigin ?? "";
    deviceId.value = view.deviceId ?? "";
    enabled.checked = view.source === "none" ? true : view.enabled;
    policyAllowlist.checked = view.localOriginPolicy.mode === "allowlist";
    policyAny.checked = view.localOriginPolicy.mode === "any";
    policyOrigins.value = (view.localOriginPolicy.origins ?? []).join("\n");
    filledOnce = true;
  }
  renderStatus(statusBox, status, (sessionId) => {
    spawn(request({ type: "detach_session", sessionId }).then(show), message);
  });
}

function show(response: PanelResponse): void {
  if (response.status !== undefined) fill(response.status);
  if (!response.ok) showMessage(message, response.error, "error");
}

/**
 * Makes sure fetch may reach the service origin. The manifest grants it at install (loopback and
 * https://*), so this asks only when a person withheld the extension's site access since; the
 * request must run inside the click (a user gesture).
 */
async function grantHostPermission(origin: string): Promise<boolean> {
  try {
    const origins = [`${new URL(origin).origin}/*`];
    if (await chrome.permissions.contains({ origins })) return true;
    return await chrome.permissions.request({ origins });
  } catch {
    return false;
  }
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  const entry: EnrollmentForm = {
    serviceOrigin: serviceOrigin.value.trim(),
    deviceId: deviceId.value.trim(),
    credential: credential.value.trim(),
    enabled: enabled.checked,
    policyMode: policyAllowlist.checked ? "allowlist" : "any",
    policyOrigins: policyOrigins.value.split(/\s+/).filter((line) => line !== ""),
  };
  const save = grantHostPermission(entry.serviceOrigin).then(async (granted) => {
    const response = await request({ type: "save_enrollment", form: entry });
    if (response.ok) {
      credential.value = "";
      showMessage(message, granted ? "Saved." : "Saved, but the permission to reach the service origin was not granted; save again and allow it.", granted ? "ok" : "error");
    }
    show(response);
  });
  spawn(save, message);
});

function refresh(): void {
  spawn(request({ type: "get_status" }).then(show), message);
}

refresh();
setInterval(refresh, 2_000);
