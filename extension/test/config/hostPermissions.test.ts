import { describe, expect, it } from "vitest";

import manifest from "../../manifest.json";
import { loadEnrollment, validateEnrollment } from "../../src/config/enrollment";
import { FakeChrome } from "../fakes/fakeChrome";

/** Whether a Chrome match pattern (`scheme://host/*`, host `*` or exact) covers an origin's fetches. */
function covers(pattern: string, origin: string): boolean {
  const match = /^(https?):\/\/([^/]+)\/\*$/.exec(pattern);
  if (match === null) return false;
  const url = new URL(origin);
  return url.protocol === `${match[1]}:` && (match[2] === "*" || match[2] === url.hostname);
}

const INSTALL_TIME: readonly string[] = manifest.host_permissions;
const SERVICE_ORIGINS = [
  "https://understudy.example.com",
  "https://fleet.example.com:8443",
  "https://10.0.0.7",
  "http://127.0.0.1:8787",
  "http://localhost:9000",
];

describe("host permissions for the service origin", () => {
  it.each(SERVICE_ORIGINS)("are granted at install for %s, so no options-page click is needed", (origin) => {
    const result = validateEnrollment({ serviceOrigin: origin, deviceId: "kiosk-7", credential: "udc_policy_credential" });
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(INSTALL_TIME.some((pattern) => covers(pattern, result.config.serviceOrigin))).toBe(true);
  });

  it("cover every origin enterprise policy can enroll, the way a policy-enrolled profile starts", async () => {
    const chrome = new FakeChrome();
    chrome.store.managed.data.set("serviceOrigin", "https://understudy.example.com");
    chrome.store.managed.data.set("deviceId", "kiosk-7");
    chrome.store.managed.data.set("deviceCredential", "udc_policy_credential");
    const loaded = await loadEnrollment(chrome.storage);
    expect(loaded.source).toBe("managed");
    const origin = loaded.config?.serviceOrigin ?? "";
    expect(INSTALL_TIME.some((pattern) => covers(pattern, origin))).toBe(true);
  });

  it("are not wider than the origins an enrollment may name", () => {
    // validateEnrollment refuses http:// off loopback, so no http pattern beyond loopback exists.
    for (const pattern of INSTALL_TIME) {
      expect(["http://127.0.0.1/*", "http://localhost/*", "https://*/*"]).toContain(pattern);
    }
    expect(validateEnrollment({ serviceOrigin: "http://understudy.example.com", deviceId: "d", credential: "udc_x" }).ok).toBe(false);
  });
});
