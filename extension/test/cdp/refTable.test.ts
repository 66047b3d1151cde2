import { describe, expect, it } from "vitest";

import { RefTable, firstGeneration } from "../../src/cdp/refTable";
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

  it("counts a session's first tab from 1, and a tab provisioned again after a browser restart from the clock", () => {
    expect(firstGeneration(1, Date.now())).toBe(1);
    const later = firstGeneration(2, 1_000_000 + 60_000);
    expect(firstGeneration(2, 1_000_000)).toBeLessThan(later);
    // Above any count a first tab reaches, so the earlier tab's refs are never issued again.
    expect(firstGeneration(2, 0)).toBeGreaterThanOrEqual(1_000_000);
    expect(firstGeneration(3, Date.now())).toBeLessThanOrEqual(999_999_999);
    expect(new RefTable(1).mint({ backendNodeId: 10, role: "button", name: "OK" })).toBe("g1e1");
  });

  it("keeps a new document's refs back until its generation is recorded", async () => {
    const refs = new RefTable(4);
    let ready = false;
    await refs.whenRecorded(); // the generation it was built with is recorded already
    refs.newDocument();
    const waiting = refs.whenRecorded().then(() => {
      ready = true;
    });
    refs.recorded(4); // a late answer for the previous document is not this one's
    await Promise.resolve();
    expect(ready).toBe(false);
    refs.recorded(5);
    await waiting;
    expect(ready).toBe(true);
  });
});
