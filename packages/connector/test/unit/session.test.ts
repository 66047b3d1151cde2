import { describe, expect, it } from "vitest";

import type { WriteResult } from "@understudy/protocol";

import { Aborted, BackendUnreachable, CommandFailed, SessionClosedError, SessionTerminal, UsageError, WriteRefused, type WriteRequest } from "../../src/index.js";
import { SESSION_ID, scripted } from "./scripted.js";

const ARGS = { allowedOrigins: ["https://example.com"], profileStateKey: "crm-bot-profile" };
const SESSION_PATH = `/v1/sessions/${SESSION_ID}`;

function calls(requests: { method: string; url: URL; body?: Record<string, unknown> | undefined }[]): string[] {
  return requests.map((r) => {
    const command = (r.body?.command as { name?: string } | undefined)?.name;
    const dry = r.body?.dryRun === true ? " (dry run)" : "";
    return `${r.method} ${r.url.pathname.replace(SESSION_PATH, "{s}")}${command ? ` ${command}${dry}` : ""}`;
  });
}

describe("Session", () => {
  it("is deleted at the end of an `await using` scope, even when the body throws", async () => {
    const { client, backend } = scripted([{ reply: "session" }, { reply: "tombstone" }]);
    const body = async (): Promise<void> => {
      await using session = await client.openSession(ARGS);
      expect(session.id).toBe(SESSION_ID);
      throw new Error("the agent failed");
    };
    await expect(body()).rejects.toThrow("the agent failed");
    expect(calls(backend.requests)).toEqual(["POST /v1/sessions", "DELETE {s}"]);
  });

  it("is deleted by withSession, which returns the body's value", async () => {
    const { client, backend } = scripted([{ reply: "session" }, { reply: "outcome" }, { reply: "tombstone" }]);
    const title = await client.withSession(ARGS, async (session) => (await session.snapshot()).title);
    expect(title).toBe("Sign in");
    expect(calls(backend.requests)).toEqual(["POST /v1/sessions", "POST {s}/commands snapshot", "DELETE {s}"]);
  });

  it("deletes a session left provisioning by the creation timeout", async () => {
    const { client, backend } = scripted(
      [{ reply: "session", code: 202, status: "provisioning", retryAfter: 9, location: true }, { reply: "tombstone" }],
      { createTimeout: 5 },
    );
    await expect(client.openSession(ARGS)).rejects.toThrow(/still provisioning/);
    expect(calls(backend.requests)).toEqual(["POST /v1/sessions", "DELETE {s}"]);
  });

  it("deletes what an open aborted while its create was unanswered may have made", async () => {
    const controller = new AbortController();
    const { client, backend } = scripted([
      () => {
        controller.abort(new Error("the agent gave up"));
        throw new DOMException("This operation was aborted", "AbortError");
      },
      { reply: "session" },
      { reply: "tombstone" },
    ]);
    await expect(client.openSession({ ...ARGS, signal: controller.signal })).rejects.toThrow(Aborted);
    expect(calls(backend.requests)).toEqual(["POST /v1/sessions", "POST /v1/sessions", "DELETE {s}"]);
    const [first, replay] = backend.requests;
    expect(first?.headers.get("Idempotency-Key")).toBeTruthy();
    expect(replay?.headers.get("Idempotency-Key")).toBe(first?.headers.get("Idempotency-Key"));
    expect(replay?.body).toEqual(first?.body);
  });

  it("deletes what an open cut off by the network may have made", async () => {
    const { client, backend } = scripted(
      [{ reply: "network_error" }, { reply: "session" }, { reply: "tombstone" }],
      { networkAttempts: 0 },
    );
    await expect(client.openSession(ARGS)).rejects.toThrow(BackendUnreachable);
    expect(calls(backend.requests)).toEqual(["POST /v1/sessions", "POST /v1/sessions", "DELETE {s}"]);
  });

  it("sends nothing more for an open aborted before it was sent, or a refused create", async () => {
    const { client, backend } = scripted([
      { reply: "problem", status: 409, code: "origin_conflict", withCommandId: false },
    ]);
    await expect(client.openSession({ ...ARGS, signal: AbortSignal.abort() })).rejects.toThrow(Aborted);
    await expect(client.openSession(ARGS)).rejects.toThrow(/origin/);
    expect(calls(backend.requests)).toEqual(["POST /v1/sessions"]);
  });

  it("shows the approval hook the dry-run preview, then sends the approved write", async () => {
    const seen: WriteRequest[] = [];
    const { client, backend } = scripted([
      { reply: "session" },
      { reply: "outcome", name: "click" },
      { reply: "outcome", name: "click" },
      { reply: "tombstone" },
    ]);
    await client.withSession(
      {
        ...ARGS,
        previewWrites: true,
        approve: (request) => {
          seen.push(request);
          return true;
        },
      },
      async (session) => {
        const result: WriteResult = await session.click("g2e7");
        expect(result.url).toBe("https://example.com/home");
      },
    );
    expect(calls(backend.requests)).toEqual([
      "POST /v1/sessions",
      "POST {s}/commands click (dry run)",
      "POST {s}/commands click",
      "DELETE {s}",
    ]);
    expect(seen).toHaveLength(1);
    expect(seen[0]?.command).toEqual({ name: "click", ref: "g2e7" });
    expect(seen[0]?.preview?.name).toBe("click");
    expect(backend.requests[2]?.body?.commandId).toBe(seen[0]?.commandId);
    expect(backend.requests[1]?.body?.commandId).not.toBe(seen[0]?.commandId);
  });

  it("sends nothing for a write the hook refuses, and does not ask about reads or dry runs", async () => {
    const asked: string[] = [];
    const { client, backend } = scripted([
      { reply: "session" },
      { reply: "outcome" },
      { reply: "outcome", name: "click" },
      { reply: "tombstone" },
    ]);
    await client.withSession(
      {
        ...ARGS,
        approve: async (request) => {
          asked.push(request.command.name);
          return Promise.resolve(false);
        },
      },
      async (session) => {
        await session.snapshot();
        await session.click("g2e7", { dryRun: true });
        const refused = await session.click("g2e7").catch((e: unknown) => e);
        expect(refused).toBeInstanceOf(WriteRefused);
      },
    );
    expect(asked).toEqual(["click"]);
    expect(calls(backend.requests)).toEqual([
      "POST /v1/sessions",
      "POST {s}/commands snapshot",
      "POST {s}/commands click (dry run)",
      "DELETE {s}",
    ]);
  });

  it("treats a hook that returns something else than a boolean as a refusal", async () => {
    const { client, backend } = scripted([{ reply: "session" }, { reply: "tombstone" }]);
    const hook = (() => "yes") as unknown as () => boolean;
    await client.withSession({ ...ARGS, approve: hook }, async (session) => {
      await expect(session.click("g2e7")).rejects.toBeInstanceOf(UsageError);
    });
    expect(calls(backend.requests)).toEqual(["POST /v1/sessions", "DELETE {s}"]);
  });

  it("throws CommandFailed for a failed outcome", async () => {
    const { client } = scripted([
      { reply: "session" },
      { reply: "outcome", name: "click", status: "failed", error: ["stale_ref", "take a new snapshot"] },
      { reply: "tombstone" },
    ]);
    await client.withSession(ARGS, async (session) => {
      const failed = await session.click("g2e7").catch((e: unknown) => e);
      expect(failed).toBeInstanceOf(CommandFailed);
      expect((failed as CommandFailed).code).toBe("stale_ref");
    });
  });

  it("ends on a 410: nothing more is sent, and closing sends one delete", async () => {
    const { client, backend } = scripted([
      { reply: "session" },
      { reply: "problem", status: 410, code: "session_terminal", withCommandId: false },
      { reply: "tombstone" },
    ]);
    const session = await client.openSession(ARGS);
    await expect(session.snapshot()).rejects.toBeInstanceOf(SessionTerminal);
    expect(session.state).toBe("ended");
    await expect(session.click("g2e7")).rejects.toBeInstanceOf(SessionClosedError);
    await session.close();
    await session.close();
    expect(session.state).toBe("closed");
    expect(calls(backend.requests)).toEqual(["POST /v1/sessions", "POST {s}/commands snapshot", "DELETE {s}"]);
  });

  it("close({ wait: true }) polls until the tombstone", async () => {
    const { client, backend } = scripted([
      { reply: "session" },
      { reply: "session", code: 202, status: "closing" },
      { reply: "session", code: 200, status: "closing" },
      { reply: "tombstone", code: 410 },
    ]);
    const session = await client.openSession(ARGS);
    const ended = await session.close({ wait: true });
    expect(ended && "endedAt" in ended).toBe(true);
    expect(calls(backend.requests)).toEqual(["POST /v1/sessions", "DELETE {s}", "GET {s}", "GET {s}"]);
  });
});
