import { describe, expect, it } from "vitest";

import { PROBLEM_CODES, SPEC_PROBLEM_CODES } from "@understudy/protocol";

import {
  DOCUMENTED_PROBLEM_CODES,
  PROBLEM_CLASSES,
  ProblemError,
  SessionTerminal,
  UnderstudyError,
  problemClassOf,
} from "../../src/index.js";

describe("the problem classes", () => {
  it("cover every problem code the catalog documents, and no other", () => {
    expect([...PROBLEM_CLASSES.keys()].sort()).toEqual([...SPEC_PROBLEM_CODES].sort());
    expect([...DOCUMENTED_PROBLEM_CODES].sort()).toEqual([...SPEC_PROBLEM_CODES].sort());
  });

  it("carry the status the spec documents for their code", () => {
    for (const [code, Class] of PROBLEM_CLASSES) {
      const statuses = new Set(
        Object.values(PROBLEM_CODES).flatMap((byStatus) =>
          Object.entries(byStatus)
            .filter(([, codes]) => codes.includes(code))
            .map(([status]) => Number(status)),
        ),
      );
      expect([...statuses], code).toEqual([Class.STATUS]);
    }
  });

  it("are named after their code and are ProblemErrors", () => {
    for (const [code, Class] of PROBLEM_CLASSES) {
      const error = new Class({ type: "about:blank", title: "t", status: Class.STATUS ?? 400, code });
      expect(error).toBeInstanceOf(ProblemError);
      expect(error).toBeInstanceOf(UnderstudyError);
      expect(error.name.toLowerCase()).toBe(code.replaceAll("_", ""));
      expect(error.code).toBe(code);
    }
  });

  it("map an unknown code to the plain ProblemError", () => {
    expect(problemClassOf("brand_new_code")).toBe(ProblemError);
    expect(problemClassOf("session_terminal")).toBe(SessionTerminal);
  });
});

describe("the package", () => {
  it("reports the version of its package.json", async () => {
    const { readFile } = await import("node:fs/promises");
    const manifest = JSON.parse(await readFile(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };
    const { VERSION } = await import("../../src/index.js");
    expect(VERSION).toBe(manifest.version);
  });
});
