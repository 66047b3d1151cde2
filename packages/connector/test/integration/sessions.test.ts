/**
 * Session creation, the Session helper's lifecycle, approval and the AI SDK tools against the
 * running backend (the Python twins: tests/connector/integration/test_sessions.py,
 * test_governance.py, test_mcp.py).
 */
import { describe, expect, it } from "vitest";

import { type ToolOutcome, understudyTools } from "../../src/ai.js";
import {
  CapacityExhausted,
  DeviceNotFound,
  IdempotencyConflict,
  OriginConflict,
  ProvisioningTimeout,   WriteRefused,
  type WriteRequest,
  isTombstone,
} from "../../src/index.js";
import { Live, ORIGINS, control, deviceState, socketUp } from "./stack.js";

const SESSION = { allowedOrigins: ORIGINS, profileStateKey: "p" };

describe("session creation against the running backend", () => {
  it("201: a first creation is connected", async () => {
    const live = await Live.start();
    await live.device();
    const created = await live.client().createSession(SESSION);
    expect([created.status, created.deviceId]).toEqual(["connected", "laptop-1"]);
    expect(live.creations().map((e) => e.status)).toEqual([201]);
    expect((await deviceState()).leases).toEqual([created.sessionId]);
  });

  it("202: a session still provisioning is polled at its Location until connected", async () => {
    const live = await Live.start();
    await live.device({ behaviour: { provision_delay_s: 0.5 } });
    const creating = live.client().createSession(SESSION);
    await control("/wait-provision");
    await control("/advance", { seconds: 5 }); // creation waits 5 s for provisioning, then 202
    const created = await creating;
    expect(created.status).toBe("connected");
    const [post, ...polls] = live.exchanges;
    expect([post?.method, post?.status]).toEqual(["POST", 202]);
    expect(polls.length).toBeGreaterThan(0);
    expect(new Set(polls.map((e) => `${e.method} ${e.path}`))).toEqual(new Set([`GET /v1/sessions/${created.sessionId}`]));
    expect(polls.at(-1)?.status).toBe(200);
    expect(polls.every((e) => !e.headers.has("idempotency-key"))).toBe(true);
    expect(new Set(live.delays)).toEqual(new Set([1]));
  });

  it("202 past the creation timeout: ProvisioningTimeout, and openSession deletes the session", async () => {
    const live = await Live.start();
    await live.device({ behaviour: { provision: "silent" } });
    const opening = live.client({ retry: { createTimeout: 0.5 } }).openSession(SESSION).catch((e: unknown) => e);
    await control("/wait-provision");
    await control("/advance", { seconds: 5 }); // creation answers 202 provisioning
    const error = await opening;
    expect(error).toBeInstanceOf(ProvisioningTimeout);
    const sessionId = (error as ProvisioningTimeout).sessionId;
    expect(live.creations().map((e) => e.status)).toEqual([202]);
    expect(live.exchanges.at(-1)).toMatchObject({ method: "DELETE", path: `/v1/sessions/${sessionId}` });
    expect([200, 202]).toContain(live.exchanges.at(-1)?.status);
  });

  it("200: a replay with the same idempotency key returns the same session, one tab", async () => {
    const live = await Live.start();
    await live.device();
    const client = live.client();
    const idempotencyKey = crypto.randomUUID();
    const first = await client.createSession({ ...SESSION, idempotencyKey });
    const again = await client.createSession({ ...SESSION, idempotencyKey });
    expect(again.sessionId).toBe(first.sessionId);
    expect(live.creations().map((e) => e.status)).toEqual([201, 200]);
    expect((await deviceState()).leases).toHaveLength(1);
  });

  it("503 no_device_available: retried with the same key and body until the device is online", async () => {
    const live = await Live.start();
    await live.device({ connect: false });
    const offline = live.when(503, "no_device_available");
    const creating = live.client().createSession(SESSION);
    await offline;
    await control("/connect"); // the profile comes online
    expect((await creating).status).toBe("connected");
    const posts = live.creations();
    expect(new Set(posts.slice(0, -1).map((e) => e.status))).toEqual(new Set([503]));
    expect(posts.at(-1)?.status).toBe(201);
    expect(new Set(posts.map((e) => e.headers.get("idempotency-key"))).size).toBe(1);
    expect(new Set(posts.map((e) => JSON.stringify(e.body))).size).toBe(1);
  });

  it("409 idempotency_conflict, 409 origin_conflict, 404 device_not_found: thrown, not retried", async () => {
    const live = await Live.start();
    await live.device();
    const client = live.client();
    const idempotencyKey = crypto.randomUUID();
    await client.createSession({ ...SESSION, idempotencyKey });
    const reused = await client
      .createSession({ allowedOrigins: ["https://other.example"], profileStateKey: "q", idempotencyKey })
      .catch((e: unknown) => e);
    expect(reused).toBeInstanceOf(IdempotencyConflict);
    const overlapping = await client.createSession({ ...SESSION, profileStateKey: "q" }).catch((e: unknown) => e);
    expect(overlapping).toBeInstanceOf(OriginConflict);
    const elsewhere = await client
      .createSession({ allowedOrigins: ["https://c.example"], profileStateKey: "c", deviceId: "no-such-device" })
      .catch((e: unknown) => e);
    expect(elsewhere).toBeInstanceOf(DeviceNotFound);
    expect(live.creations().map((e) => e.status)).toEqual([201, 409, 409, 404]);
  });

  it("429 capacity_exhausted: a full device is refused with its Retry-After", async () => {
    const live = await Live.start();
    await live.device();
    const client = live.client();
    await client.createSession({ allowedOrigins: ["https://a.example"], profileStateKey: "a" });
    await client.createSession({ allowedOrigins: ["https://b.example"], profileStateKey: "b" });
    const error = await client
      .createSession({ allowedOrigins: ["https://c.example"], profileStateKey: "c" })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CapacityExhausted);
    expect((error as CapacityExhausted).retryAfter).toBeGreaterThan(0);
  });
});

describe("the Session helper against the running backend", () => {
  it("always deletes: `await using` ends the session even when the body throws", async () => {
    const live = await Live.start();
    await live.device();
    const client = live.client();
    let id = "";
    const body = async (): Promise<void> => {
      await using s = await client.openSession(SESSION);
      id = s.id;
      await socketUp(s.id);
      await s.snapshot();
      throw new Error("the agent failed");
    };
    await expect(body()).rejects.toThrow("the agent failed");
    expect(live.exchanges.at(-1)).toMatchObject({ method: "DELETE", path: `/v1/sessions/${id}`, status: 202 });
    const ended = await reasonWhenEnded(client, id);
    expect(ended).toBe("deleted");
  });

  it("close({ wait: true }) frees the device for the next session at once", async () => {
    const live = await Live.start();
    await live.device();
    const client = live.client();
    const first = await client.openSession({ ...SESSION, profileStateKey: "same" });
    const ended = await first.close({ wait: true });
    expect(ended !== undefined && isTombstone(ended)).toBe(true);
    const second = await client.createSession({ ...SESSION, profileStateKey: "same" });
    expect(second.status).toBe("connected");
  });

  it("the approval hook sees the dry-run preview; a refused write never reaches the device", async () => {
    const live = await Live.start();
    await live.device();
    const seen: WriteRequest[] = [];
    await live.client().withSession(
      {
        ...SESSION,
        previewWrites: true,
        approve: (request) => {
          seen.push(request);
          return request.command.name !== "click";
        },
      },
      async (s) => {
        await socketUp(s.id);
        await expect(s.click("g1e1")).rejects.toBeInstanceOf(WriteRefused);
        await s.fill("g1e2", "jane");
      },
    );
    expect(seen.map((r) => [r.command.name, r.preview?.name, r.preview?.preview !== undefined])).toEqual([
      ["click", "click", true],
      ["fill", "fill", true],
    ]);
    const sent = live.commands().map((e) => [(e.body?.command as { name: string }).name, e.body?.dryRun]);
    expect(sent).toEqual([
      ["click", true],
      ["fill", true],
      ["fill", false],
    ]);
    const executions = (await deviceState()).executions;
    expect(Object.keys(executions)).toEqual([seen[1]?.commandId]);
  });

  it("AI SDK tools: a read runs, a write is refused by default and never reaches the device", async () => {
    const live = await Live.start();
    await live.device();
    await using s = await live.client().openSession(SESSION);
    await socketUp(s.id);
    const tools = understudyTools(s);
    const call = { toolCallId: "call-1", messages: [] };
    const page = (await tools.snapshot?.execute?.({}, call)) as ToolOutcome;
    expect(page.ok && page.result.name).toBe("snapshot");
    const refused = (await tools.click?.execute?.({ ref: "g1e1" }, call)) as ToolOutcome;
    expect(refused).toMatchObject({ ok: false, error: { code: "write_refused" } });
    const allowed = understudyTools(s, { approval: "all" });
    const clicked = (await allowed.click?.execute?.({ ref: "g1e1" }, call)) as ToolOutcome;
    expect(clicked.ok).toBe(true);
    expect(Object.values((await deviceState()).executions)).toEqual([1]);
  });
});

async function reasonWhenEnded(client: ReturnType<Live["client"]>, id: string): Promise<string | undefined> {
  for (let i = 0; i < 100; i += 1) {
    const current = await client.getSession(id);
    if (isTombstone(current)) return current.reason;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return undefined;
}
