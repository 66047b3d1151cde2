import { describe, expect, it } from "vitest";

import { RefTable, initialGeneration } from "../../src/cdp/refTable";
import { CommandError } from "../../src/errors";

function message(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    return error instanceof CommandError ? error.message : "other";
  }
  return "";
}

function code(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (error) {
    return error instanceof CommandError ? error.code : "other";
  }
  return undefined;
}

describe("RefTable", () => {
  it("mints g<generation>e<n> refs, stable per node within a document", () => {
    const refs = new RefTable(7);
    const a = refs.mint({ backendNodeId: 10, role: "button", name: "OK" });
    const b = refs.mint({ backendNodeId: 11, role: "link", name: "Home" });
    expect([a, b]).toEqual(["g7e1", "g7e2"]);
    expect(refs.mint({ backendNodeId: 10, role: "button", name: "OK" })).toBe("g7e1");
    expect(refs.resolve("g7e2").backendNodeId).toBe(11);
  });

  it("retires every ref on a new document: stale, never guessed", () => {
    const refs = new RefTable(7);
    refs.mint({ backendNodeId: 10, role: "button", name: "OK" });
    refs.newDocument();
    refs.mint({ backendNodeId: 99, role: "button", name: "Other" });
    expect(code(() => refs.resolve("g7e1"))).toBe("stale_ref");
    expect(refs.resolve("g8e1").backendNodeId).toBe(99);
    expect(code(() => refs.resolve("g8e5"))).toBe("ref_not_found");
    expect(code(() => refs.resolve("e5"))).toBe("invalid_arguments");
  });

  it("says a generation this tab never issued was never issued, and an older one is an earlier document", () => {
    const refs = new RefTable(7);
    refs.newDocument();
    expect(code(() => refs.resolve("g9e1"))).toBe("stale_ref");
    expect(message(() => refs.resolve("g9e1"))).toBe(
      "Ref g9e1 names generation 9, which this tab never issued (its current document is generation 8); take a snapshot and use its refs.",
    );
    expect(message(() => refs.resolve("g7e1"))).toContain("belongs to an earlier document");
    expect(message(() => refs.resolve("g7e1"))).not.toContain("never issued");
  });

  it("starts each runtime at a clock-derived generation so a new tab never reuses an old number", () => {
    expect(initialGeneration(1_000_000)).toBeLessThan(initialGeneration(1_000_000 + 60_000));
    expect(initialGeneration(Date.now())).toBeLessThanOrEqual(999_999_999);
  });
});
