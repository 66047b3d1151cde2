import { describe, expect, it } from "vitest";

import { ENROLLMENT_KEY, loadEnrollment, saveLocalEnrollment, validateEnrollment, viewOf } from "../../src/config/enrollment";
import { FakeChrome } from "../fakes/fakeChrome";
import { CREDENTIAL } from "../fakes/harness";

const VALID = { serviceOrigin: "https://understudy.example.com", deviceId: "laptop-1", credential: CREDENTIAL, enabled: true };

describe("enrollment", () => {
  it("validates and canonicalises a configuration", () => {
    const result = validateEnrollment({ ...VALID, serviceOrigin: "HTTPS://Understudy.Example.com/", localOriginPolicy: { mode: "allowlist", origins: ["https://b.example", "https://a.example", "https://a.example/"] } });
    expect(result).toEqual({
      ok: true,
      config: { ...VALID, serviceOrigin: "https://understudy.example.com", localOriginPolicy: { mode: "allowlist", origins: ["https://a.example", "https://b.example"] } },
    });
  });

  it("lists every problem an operator must fix", () => {
    const result = validateEnrollment({ serviceOrigin: "http://understudy.example.com", deviceId: "Laptop 1", credential: "" });
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.problems).toHaveLength(3);
  });

  it("prefers enterprise policy over the local enrollment and says so", async () => {
    const chrome = new FakeChrome();
    chrome.store.local.data.set(ENROLLMENT_KEY, { ...VALID, deviceId: "local-device" });
    chrome.store.managed.data.set("serviceOrigin", "https://fleet.example.com");
    chrome.store.managed.data.set("deviceId", "fleet-7");
    chrome.store.managed.data.set("deviceCredential", "udc_fleet_credential_value");
    const loaded = await loadEnrollment(chrome.storage);
    expect(loaded.source).toBe("managed");
    expect(loaded.config?.deviceId).toBe("fleet-7");
  });

  it("uses the local enrollment when no policy is set, and reports none when neither exists", async () => {
    const chrome = new FakeChrome();
    expect((await loadEnrollment(chrome.storage)).source).toBe("none");
    chrome.store.local.data.set(ENROLLMENT_KEY, VALID);
    expect((await loadEnrollment(chrome.storage)).config?.deviceId).toBe("laptop-1");
  });

  it("keeps the stored credential when the form leaves it blank, and never shows it", async () => {
    const chrome = new FakeChrome();
    await saveLocalEnrollment(chrome.storage, VALID);
    const saved = await saveLocalEnrollment(chrome.storage, { ...VALID, credential: "", deviceId: "laptop-2" });
    expect(saved.ok).toBe(true);
    const loaded = await loadEnrollment(chrome.storage);
    expect(loaded.config?.credential).toBe(CREDENTIAL);
    const view = viewOf(loaded);
    expect(view.credentialSet).toBe(true);
    expect(JSON.stringify(view)).not.toContain(CREDENTIAL);
  });

  it("stores only the enrollment record in chrome.storage.local", async () => {
    const chrome = new FakeChrome();
    await saveLocalEnrollment(chrome.storage, VALID);
    expect([...chrome.store.local.data.keys()]).toEqual([ENROLLMENT_KEY]);
  });
});
