import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { describe, expect, it } from "vitest";

import { READ_COMMANDS, SPEC_PROBLEM_CODES, WRITE_COMMANDS, isWriteCommand } from "@understudy/protocol";
import type { Command, CommandName } from "@understudy/protocol";
import { SCHEMAS } from "@understudy/protocol/zod";
import * as schemas from "@understudy/protocol/zod";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

type Json = Record<string, unknown>;

function readJson(path: string): Json {
  return JSON.parse(readFileSync(join(ROOT, path), "utf8")) as Json;
}

/** Every named schema of spec/ with its examples: frame files and the OpenAPI components. */
function specDefinitions(): Map<string, Json> {
  const found = new Map<string, Json>();
  const commands = readJson("spec/frames/commands.json");
  const common = readJson("spec/frames/common.json");
  for (const doc of [commands, common]) {
    for (const [name, schema] of Object.entries(doc.$defs as Record<string, Json>)) {
      found.set(name, schema);
    }
  }
  // The JSON copy of spec/openapi.yaml that codegen writes into the backend package.
  const openapi = readJson("backend/src/understudy/generated/reference/openapi.json");
  const components = (openapi.components as Json).schemas as Record<string, Json>;
  for (const [name, schema] of Object.entries(components)) found.set(name, schema);
  return found;
}

const definitions = specDefinitions();
const withExamples = Object.keys(SCHEMAS).flatMap((name) => {
  const examples = (definitions.get(name)?.examples ?? []) as unknown[];
  return examples.map((example, index) => ({ name, index, example }));
});

describe("the zod validators generated from spec/", () => {
  it("cover the catalog, the command bodies and the HTTP bodies the connector reads", () => {
    for (const name of ["Command", "CommandRequest", "CommandOutcome", "CommandPending", "Problem", "Session", "SessionTombstone", "DeviceList"]) {
      expect(Object.keys(SCHEMAS)).toContain(name);
    }
    expect(withExamples.length).toBeGreaterThan(20);
  });

  it.each(withExamples)("accept example $index of $name", ({ name, example }) => {
    const schema = SCHEMAS[name as keyof typeof SCHEMAS];
    const parsed = schema.safeParse(example);
    expect(parsed.error?.issues).toBeUndefined();
  });

  it("refuse what the spec refuses: unknown fields, a wrong const, out-of-range numbers", () => {
    expect(schemas.ClickCommand.safeParse({ name: "click", ref: "g1e1", force: true }).success).toBe(false);
    expect(schemas.ClickCommand.safeParse({ name: "hover", ref: "g1e1" }).success).toBe(false);
    expect(schemas.SnapshotCommand.safeParse({ name: "snapshot", maxNodes: 0 }).success).toBe(false);
    expect(schemas.Problem.safeParse({ type: "x", title: "t", status: 200, code: "c0" }).success).toBe(false);
    expect(schemas.CommandOutcome.safeParse({ commandId: "nope" }).success).toBe(false);
  });

  it("name every catalog command once, as a read or a write", () => {
    const branches = schemas.Command.options.map((option) => option.shape.name.value);
    const catalog: CommandName[] = [...READ_COMMANDS, ...WRITE_COMMANDS];
    expect([...branches].sort()).toEqual([...catalog].sort());
    for (const name of branches) expect(isWriteCommand(name)).toBe(WRITE_COMMANDS.has(name as never));
    const typed: Command = schemas.Command.parse({ name: "click", ref: "g2e7" });
    expect(typed.name).toBe("click");
  });

  it("list the documented problem codes", () => {
    expect(SPEC_PROBLEM_CODES).toContain("command_outcome_unknown");
    expect(new Set(SPEC_PROBLEM_CODES).size).toBe(SPEC_PROBLEM_CODES.length);
  });
});
