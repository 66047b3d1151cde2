import { describe, expect, it } from "vitest";

import { READ_COMMANDS, WRITE_COMMANDS } from "@understudy/protocol";
import type { ToolExecutionOptions } from "ai";

import { type ToolOutcome, toolSchemas, understudyTools } from "../../src/ai.js";
import { SESSION_ID, scripted } from "./scripted.js";

const ARGS = { allowedOrigins: ["https://example.com"], profileStateKey: "crm-bot-profile" };
const CALL: ToolExecutionOptions = { toolCallId: "call-1", messages: [] };

async function run(
  tools: ReturnType<typeof understudyTools>,
  name: string,
  input: Record<string, unknown>,
): Promise<ToolOutcome> {
  const tool = tools[name];
  if (tool?.execute === undefined) throw new Error(`no tool ${name}`);
  return (await tool.execute(input, CALL)) as ToolOutcome;
}

describe("AI SDK tools", () => {
  it("offer every catalog command with its generated schema, dryRun on writes only", () => {
    const schemas = toolSchemas();
    expect([...schemas.keys()].sort()).toEqual([...READ_COMMANDS, ...WRITE_COMMANDS].sort());
    expect(schemas.get("click")?.safeParse({ ref: "g2e7", dryRun: true }).success).toBe(true);
    expect(schemas.get("click")?.safeParse({ ref: "g2e7", force: true }).success).toBe(false);
    expect(schemas.get("click")?.safeParse({}).success).toBe(false);
    expect(schemas.get("snapshot")?.safeParse({ dryRun: true }).success).toBe(false);
    expect(schemas.get("click")?.description).toMatch(/click/i);
  });

  it("refuse writes by default: nothing is sent, the model is told not to retry", async () => {
    const { client, backend } = scripted([{ reply: "session" }, { reply: "outcome" }, { reply: "outcome", name: "click" }]);
    const session = await client.openSession(ARGS);
    const tools = understudyTools(session);
    expect(Object.keys(tools).sort()).toEqual([...READ_COMMANDS, ...WRITE_COMMANDS].sort());
    expect((await run(tools, "snapshot", {})).ok).toBe(true);
    const refused = await run(tools, "click", { ref: "g2e7" });
    expect(refused).toMatchObject({ ok: false, error: { kind: "WriteRefused", code: "write_refused" } });
    const preview = await run(tools, "click", { ref: "g2e7", dryRun: true });
    expect(preview.ok).toBe(true);
    const sent = backend.requests.slice(1).map((r) => [(r.body?.command as { name: string }).name, r.body?.dryRun]);
    expect(sent).toEqual([
      ["snapshot", false],
      ["click", true],
    ]);
  });

  it("hide writes with reads-only, and send them with all", async () => {
    const { client } = scripted([{ reply: "session" }, { reply: "outcome", name: "click" }]);
    const session = await client.openSession(ARGS);
    expect(Object.keys(understudyTools(session, { approval: "reads-only" })).sort()).toEqual([...READ_COMMANDS].sort());
    const done = await run(understudyTools(session, { approval: "all" }), "click", { ref: "g2e7" });
    expect(done).toMatchObject({ ok: true, result: { name: "click" } });
    expect(session.id).toBe(SESSION_ID);
  });

  it("put each write to a custom hook", async () => {
    const { client, backend } = scripted([{ reply: "session" }, { reply: "outcome", name: "fill" }]);
    const session = await client.openSession(ARGS);
    const asked: unknown[] = [];
    const ids: string[] = [];
    const tools = understudyTools(session, {
      approval: (write) => {
        asked.push(write.command);
        ids.push(write.commandId);
        return write.command.name === "fill";
      },
    });
    expect((await run(tools, "fill", { ref: "g2e5", value: "jane" })).ok).toBe(true);
    expect((await run(tools, "click", { ref: "g2e7" })).ok).toBe(false);
    expect(asked).toEqual([
      { name: "fill", ref: "g2e5", value: "jane" },
      { name: "click", ref: "g2e7" },
    ]);
    expect(backend.requests).toHaveLength(2);
    expect(backend.requests[1]?.body?.commandId).toBe(ids[0]);
  });
});
