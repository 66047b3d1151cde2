/**
 * Every row of the submitCommand outcome table (tests/connector/scenarios.json, shared with the
 * Python connector) drives the client against a scripted fetch: the exact requests sent (the same
 * commandId and body on every resubmission, polls of that same command), the waits taken and
 * what the caller finally gets.
 */
import { describe, expect, it } from "vitest";

import type { Command, CommandOutcome } from "@understudy/protocol";

import * as connector from "../../src/index.js";
import { API_KEY, SESSION_ID, TABLE, commandIdOf, scripted } from "./scripted.js";

const COMMANDS_PATH = `/v1/sessions/${SESSION_ID}/commands`;

describe("submitCommand follows the shared outcome table", () => {
  it("has every row of the table", () => {
    expect(TABLE.submitCommand.length).toBe(28);
  });

  it.each(TABLE.submitCommand.map((row) => [row.id, row] as const))("%s", async (_id, row) => {
    const command = TABLE.commands[row.command ?? "snapshot"] as unknown as Command;
    const { client, backend, clock } = scripted(row.steps, row.retry);
    let got: unknown;
    try {
      got = await client.submitCommand(SESSION_ID, command);
    } catch (error) {
      got = error;
    }
    expect(backend.remaining, "the script was played to the end").toBe(0);
    const first = backend.requests[0];
    if (first === undefined) throw new Error("no request was sent");
    const commandId = commandIdOf(first);
    expect(first.body).toEqual({ commandId, dryRun: false, command });
    const calls = backend.requests.map((request) => {
      expect(request.headers.get("authorization")).toBe(`Bearer ${API_KEY}`);
      expect(request.headers.has("idempotency-key")).toBe(false);
      if (request.method === "POST") {
        expect(request.url.pathname).toBe(COMMANDS_PATH);
        expect(request.body, "a resubmission changed the request").toEqual(first.body);
        return "submit";
      }
      expect(request.method).toBe("GET");
      expect(request.url.pathname).toBe(`${COMMANDS_PATH}/${commandId}`);
      return "poll";
    });
    expect(calls).toEqual(row.calls);
    expect(clock.sleeps).toEqual(row.sleeps);
    if (row.outcome.status !== undefined) {
      const outcome = got as CommandOutcome;
      expect(outcome.status).toBe(row.outcome.status);
      expect(outcome.commandId).toBe(commandId);
    } else {
      const Expected = (connector as unknown as Record<string, new (...args: never[]) => Error>)[row.outcome.error ?? ""];
      expect(Expected, `${row.outcome.error} is exported`).toBeTypeOf("function");
      expect(got).toBeInstanceOf(Expected);
      expect((got as Error).constructor).toBe(Expected);
      const carried = (got as { commandId?: string }).commandId;
      if (carried !== undefined) expect(carried).toBe(commandId);
    }
  });
});

describe("submitCommand", () => {
  const click: Command = { name: "click", ref: "g2e14" };

  it("uses a caller-given command id on every attempt", async () => {
    const chosen = "0f1e2d3c-4b5a-4968-8776-655443322110";
    const { client, backend } = scripted([
      { reply: "problem", status: 504, code: "command_not_started" },
      { reply: "outcome", name: "click" },
    ]);
    const outcome = await client.submitCommand(SESSION_ID, click, { commandId: chosen });
    expect(outcome.commandId).toBe(chosen);
    expect(backend.requests.map(commandIdOf)).toEqual([chosen, chosen]);
  });

  it("draws a new command id for each logical call", async () => {
    const { client, backend } = scripted([{ reply: "outcome" }, { reply: "outcome" }]);
    await client.submitCommand(SESSION_ID, { name: "snapshot" });
    await client.submitCommand(SESSION_ID, { name: "snapshot" });
    const [a, b] = backend.requests.map(commandIdOf);
    expect(a).not.toBe(b);
  });

  it("does not follow a Location on another origin", async () => {
    const { client, backend } = scripted([{ reply: "pending", location: "https://elsewhere.test/steal" }, { reply: "outcome" }]);
    await client.submitCommand(SESSION_ID, { name: "snapshot" });
    const poll = backend.requests[1];
    expect(poll?.url.host).toBe("understudy.test");
    expect(poll?.url.pathname).toBe(`${COMMANDS_PATH}/${commandIdOf(backend.requests[0]!)}`);
  });

  it("throws CommandOutcomeUnknown carrying the command id, after one request", async () => {
    const { client, backend } = scripted([{ reply: "problem", status: 409, code: "command_outcome_unknown" }]);
    const error = await client.submitCommand(SESSION_ID, click).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(connector.CommandOutcomeUnknown);
    expect(error).toBeInstanceOf(connector.ProblemError);
    const unknown = error as connector.ProblemError;
    expect(unknown.commandId).toBe(commandIdOf(backend.requests[0]!));
    expect([unknown.status, unknown.code]).toEqual([409, "command_outcome_unknown"]);
    expect(backend.requests).toHaveLength(1);
  });

  it("pollCommand polls until terminal and never resubmits", async () => {
    const commandId = "c3a1e0f2-94d1-4b5e-8d5c-0e6f1a2b3c4d";
    let { client, backend } = scripted([{ reply: "pending", name: "click" }, { reply: "outcome", name: "click" }]);
    expect((await client.pollCommand(SESSION_ID, commandId)).status).toBe("succeeded");
    expect(backend.requests.map((r) => [r.method, r.url.pathname])).toEqual([
      ["GET", `${COMMANDS_PATH}/${commandId}`],
      ["GET", `${COMMANDS_PATH}/${commandId}`],
    ]);
    ({ client, backend } = scripted([{ reply: "problem", status: 504, code: "command_not_started" }]));
    await expect(client.pollCommand(SESSION_ID, commandId)).rejects.toBeInstanceOf(connector.CommandNotStarted);
    expect(backend.requests).toHaveLength(1);
  });

  it("refuses a command outside the catalog before sending anything", async () => {
    const { client, backend } = scripted([]);
    await expect(client.submitCommand(SESSION_ID, { name: "click" } as unknown as Command)).rejects.toThrow(connector.UsageError);
    expect(backend.requests).toHaveLength(0);
  });

  it("stops at once when the caller aborts, naming the command to poll", async () => {
    const controller = new AbortController();
    const { backend } = scripted([{ reply: "pending", name: "click", retryAfter: 5 }]);
    const sleeping = new Promise<void>((resolve) => {
      // Abort during the wait before the first poll.
      setTimeout(() => {
        controller.abort(new Error("the user cancelled"));
        resolve();
      }, 0);
    });
    const abortable = new connector.Client({
      baseUrl: "http://understudy.test",
      apiKey: API_KEY,
      fetch: backend.fetch,
      sleep: async (_seconds, signal) => {
        await sleeping;
        if (signal?.aborted) throw new connector.Aborted("the wait was aborted");
      },
    });
    const error = await abortable.submitCommand(SESSION_ID, click, { signal: controller.signal }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(connector.Aborted);
    expect(backend.requests).toHaveLength(1);
  });

  it("cuts the built-in wait short when the caller aborts", async () => {
    const { backend } = scripted([{ reply: "pending", name: "click", retryAfter: 30 }]);
    const real = new connector.Client({ baseUrl: "http://understudy.test", apiKey: API_KEY, fetch: backend.fetch });
    // The 30 s Retry-After is far past the test's timeout: only an abort ends the wait in time.
    const error = await real
      .submitCommand(SESSION_ID, click, { signal: AbortSignal.timeout(50) })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(connector.Aborted);
    expect((error as connector.Aborted).commandId).toBe(commandIdOf(backend.requests[0]!));
    expect(backend.requests).toHaveLength(1);
  });

  it("sends nothing when the signal has already fired", async () => {
    const { client, backend } = scripted([]);
    const error = await client
      .submitCommand(SESSION_ID, click, { signal: AbortSignal.abort() })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(connector.Aborted);
    expect((error as connector.Aborted).commandId).toMatch(/^[0-9a-f-]{36}$/);
    expect(backend.requests).toHaveLength(0);
  });
});
