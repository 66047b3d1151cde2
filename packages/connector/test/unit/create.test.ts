/**
 * Session creation against the shared table (tests/connector/scenarios.json): one idempotency key
 * per logical call, reused on every documented retry.
 */
import { describe, expect, it } from "vitest";

import type { Session } from "@understudy/protocol";

import * as connector from "../../src/index.js";
import { SESSION_ID, TABLE, scripted } from "./scripted.js";

const ARGS = { allowedOrigins: ["https://example.com"], profileStateKey: "crm-bot-profile" };
const CALLS: Record<string, [string, string]> = {
  create: ["POST", "/v1/sessions"],
  poll: ["GET", `/v1/sessions/${SESSION_ID}`],
};

describe("createSession follows the shared creation table", () => {
  it("has every row of the table", () => {
    expect(TABLE.createSession.length).toBe(15);
  });

  it.each(TABLE.createSession.map((row) => [row.id, row] as const))("%s", async (_id, row) => {
    const { client, backend, clock } = scripted(row.steps, row.retry);
    let got: unknown;
    try {
      got = await client.createSession(ARGS);
    } catch (error) {
      got = error;
    }
    expect(backend.remaining, "the script was played to the end").toBe(0);
    expect(backend.requests.map((r) => [r.method, r.url.pathname])).toEqual(row.calls.map((call) => CALLS[call]));
    expect(clock.sleeps).toEqual(row.sleeps);
    const posts = backend.requests.filter((r) => r.method === "POST");
    const keys = new Set(posts.map((r) => r.headers.get("idempotency-key")));
    expect(keys.size, "every attempt of one creation carries the same key").toBe(1);
    expect([...keys][0]).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    for (const post of posts) expect(post.body).toEqual(TABLE.createBody);
    for (const poll of backend.requests.filter((r) => r.method === "GET")) {
      expect(poll.headers.has("idempotency-key")).toBe(false);
    }
    if (row.outcome.status !== undefined) {
      expect((got as Session).status).toBe(row.outcome.status);
    } else {
      const Expected = (connector as unknown as Record<string, new (...args: never[]) => Error>)[row.outcome.error ?? ""];
      expect(Expected, `${row.outcome.error} is exported`).toBeTypeOf("function");
      expect((got as Error).constructor).toBe(Expected);
    }
  });
});

describe("createSession", () => {
  it("draws a new idempotency key for each creation", async () => {
    const { client, backend } = scripted([{ reply: "session" }, { reply: "session" }]);
    await client.createSession(ARGS);
    await client.createSession(ARGS);
    const [a, b] = backend.requests.map((r) => r.headers.get("idempotency-key"));
    expect(a).not.toBe(b);
  });

  it("sends a caller-given idempotency key on every attempt", async () => {
    const key = "5f1d2c3b-4a59-4e8f-a7b6-c5d4e3f2a1b0";
    const { client, backend } = scripted([{ reply: "network_error" }, { reply: "session" }]);
    await client.createSession({ ...ARGS, idempotencyKey: key });
    expect(backend.requests.map((r) => r.headers.get("idempotency-key"))).toEqual([key, key]);
  });

  it("exposes the Retry-After of capacity_exhausted", async () => {
    const { client } = scripted([{ reply: "problem", status: 429, code: "capacity_exhausted", retryAfter: 30 }]);
    const error = await client.createSession(ARGS).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(connector.CapacityExhausted);
    expect((error as connector.ProblemError).retryAfter).toBe(30);
  });

  it("does not repeat an attended creation after a network error (it has no key)", async () => {
    const { client, backend } = scripted([{ reply: "network_error" }]);
    const error = await client.createSession({ mode: "attended" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(connector.BackendUnreachable);
    expect((error as Error).message).toMatch(/no idempotency key/);
    expect(backend.requests).toHaveLength(1);
    expect(backend.requests[0]?.body).toBeUndefined();
  });

  it.each([
    { allowedOrigins: ["https://example.com"] },
    { profileStateKey: "crm" },
    { allowedOrigins: [], profileStateKey: "crm" },
    { allowedOrigins: ["https://example.com"], profileStateKey: "" },
  ])("refuses an unattended creation without origins and a profile key: %j", async (args) => {
    const { client, backend } = scripted([]);
    await expect(client.createSession(args)).rejects.toThrow(connector.UsageError);
    expect(backend.requests).toHaveLength(0);
  });

  it("refuses unattended arguments on an attended creation", async () => {
    const { client } = scripted([]);
    await expect(client.createSession({ mode: "attended", allowedOrigins: ["https://example.com"] })).rejects.toThrow(/attended/);
  });

  it("repeats a delete after a network error", async () => {
    const { client, backend, clock } = scripted([{ reply: "network_error" }, { reply: "tombstone" }]);
    const ended = await client.deleteSession(SESSION_ID);
    expect(connector.isTombstone(ended)).toBe(true);
    expect(backend.requests.map((r) => r.method)).toEqual(["DELETE", "DELETE"]);
    expect(clock.sleeps).toEqual([0.5]);
  });
});
