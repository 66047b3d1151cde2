import { describe, expect, it } from "vitest";

import manifest from "../manifest.json";
import { EXTENSION_ID } from "../src/extensionId";

describe("extension id", () => {
  it("is derived from the manifest key the way Chrome derives it", async () => {
    const der = Uint8Array.from(atob(manifest.key), (c) => c.charCodeAt(0));
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", der));
    const hex = [...digest].map((b) => b.toString(16).padStart(2, "0")).join("").slice(0, 32);
    const id = [...hex].map((c) => String.fromCharCode(97 + parseInt(c, 16))).join("");
    expect(EXTENSION_ID).toBe(id);
  });

  it("declares what the extension needs and no more", () => {
    expect(manifest.manifest_version).toBe(3);
    expect(manifest.background).toEqual({ service_worker: "background.js", type: "module" });
    expect([...manifest.permissions].sort()).toEqual(["alarms", "debugger", "declarativeNetRequest", "storage", "tabs", "webNavigation"]);
    // Granted at install: the service origin a policy sets needs no click (see hostPermissions.test.ts).
    expect(manifest.host_permissions).toEqual(["http://127.0.0.1/*", "http://localhost/*", "https://*/*"]);
    expect("optional_host_permissions" in manifest).toBe(false);
    expect(manifest.icons).toEqual({ "16": "icon-16.png", "48": "icon-48.png", "128": "icon-128.png" });
    expect(manifest.action.default_icon).toEqual(manifest.icons);
  });
});
