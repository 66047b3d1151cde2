import { describe, expect, it } from "vitest";

import { OriginPolicy, canonicalOrigin, isLoopbackHost } from "../../src/config/origins";

describe("canonicalOrigin", () => {
  it("canonicalises the way the backend does", () => {
    expect(canonicalOrigin("HTTPS://Example.COM:443")).toBe("https://example.com");
    expect(canonicalOrigin("https://example.com/")).toBe("https://example.com");
    expect(canonicalOrigin("https://example.com:8443")).toBe("https://example.com:8443");
    expect(canonicalOrigin("http://127.0.0.1:8080")).toBe("http://127.0.0.1:8080");
    expect(canonicalOrigin("http://localhost:3000")).toBe("http://localhost:3000");
  });

  it("rejects anything that is not exactly an origin", () => {
    for (const bad of [
      "http://example.com",
      "https://example.com/path",
      "https://example.com/./",
      "https://example.com?q=1",
      "https://example.com#x",
      "https://user:pw@example.com",
      "https://*.example.com",
      "ftp://example.com",
      "example.com",
      "",
    ]) {
      expect(canonicalOrigin(bad), bad).toBeUndefined();
    }
  });

  it("knows loopback hosts", () => {
    expect(isLoopbackHost("127.0.0.1")).toBe(true);
    expect(isLoopbackHost("127.10.0.3")).toBe(true);
    expect(isLoopbackHost("localhost")).toBe(true);
    expect(isLoopbackHost("[::1]")).toBe(true);
    expect(isLoopbackHost("10.0.0.1")).toBe(false);
    expect(isLoopbackHost("localhost.example.com")).toBe(false);
  });
});

describe("OriginPolicy", () => {
  it("allows about:blank and the session's origins within the local policy", () => {
    const policy = new OriginPolicy(["https://example.com"], { mode: "any" });
    expect(policy.allowsUrl("about:blank")).toBe(true);
    expect(policy.allowsUrl("https://example.com/login?x=1")).toBe(true);
    expect(policy.allowsUrl("https://sub.example.com/")).toBe(false);
    expect(policy.allowsUrl("http://example.com/")).toBe(false);
  });

  it("refuses opaque and script URLs", () => {
    const policy = new OriginPolicy(undefined, { mode: "any" });
    for (const url of ["javascript:alert(1)", "data:text/html,hi", "file:///etc/passwd", "chrome://settings", "about:srcdoc"]) {
      expect(policy.allowsUrl(url), url).toBe(false);
    }
    expect(policy.allowsUrl("https://anything.example/")).toBe(true);
  });

  it("lets the local allowlist narrow a session without origins", () => {
    const policy = new OriginPolicy(undefined, { mode: "allowlist", origins: ["https://example.com"] });
    expect(policy.allowsUrl("https://example.com/")).toBe(true);
    expect(policy.allowsUrl("https://other.example/")).toBe(false);
  });
});
