/**
 * One run against real Chromium: tests/e2e/test_typescript_connector.py starts the backend, a
 * Chromium with the extension and a login site (tests/e2e/_stack.py), then runs this file with
 * UNDERSTUDY_URL, UNDERSTUDY_API_KEY and SITE_ORIGIN set. Without them there is nothing to drive.
 */
import { describe, expect, it } from "vitest";

import type { SnapshotResult } from "@understudy/protocol";

import { understudyTools } from "../../src/ai.js";
import { Client, CommandFailed, WriteRefused, type WriteRequest } from "../../src/index.js";

const URL = process.env.UNDERSTUDY_URL;
const KEY = process.env.UNDERSTUDY_API_KEY;
const ORIGIN = process.env.SITE_ORIGIN;

function refOf(page: SnapshotResult, role: string, name: string): string {
  const found = page.nodes.find((node) => node.role === role && node.name === name && node.ref !== undefined);
  if (found?.ref === undefined) throw new Error(`no ${role} named ${name} on ${page.url}`);
  return found.ref;
}

describe.skipIf(URL === undefined || KEY === undefined || ORIGIN === undefined)("real Chromium", () => {
  it("signs in with a vaulted password; the approval hook sees each write's preview first", async () => {
    const client = new Client({ baseUrl: URL!, apiKey: KEY! });
    const asked: WriteRequest[] = [];
    await using session = await client.openSession({
      allowedOrigins: [ORIGIN!],
      profileStateKey: `ts-${crypto.randomUUID()}`,
      previewWrites: true,
      approve: (write) => {
        asked.push(write);
        return write.preview?.preview?.allowed !== false;
      },
    });
    expect(session.info.status).toBe("connected");
    await session.navigate(`${ORIGIN!}/login`);
    const form = await session.snapshot({ interactiveOnly: true });
    expect(form.title).toBe("Sign in");
    await session.fill(refOf(form, "textbox", "Username"), "jane");
    await session.fillSecret(refOf(form, "textbox", "Password"), "vault:login-password");
    await session.click(refOf(form, "button", "Sign in"));
    const welcome = await session.waitFor({ kind: "text_appears", text: "Welcome, jane" }, 10_000);
    expect(welcome.matched).toBe(true);
    expect(asked.map((write) => write.command.name)).toEqual(["navigate", "fill", "fill_secret", "click"]);
    expect(asked.every((write) => write.preview !== undefined)).toBe(true);
    expect(JSON.stringify(asked)).not.toContain(process.env.LOGIN_PASSWORD ?? "(no password given)");

    // The tools refuse writes by default; reads run, and a stale ref is an error the model can act on.
    const tools = understudyTools(session);
    const call = { toolCallId: "call-1", messages: [] };
    expect(await tools.click?.execute?.({ ref: refOf(form, "button", "Sign in") }, call)).toMatchObject({
      ok: false,
      error: { kind: WriteRefused.name },
    });
    const stale = await session.click(refOf(form, "button", "Sign in"), { dryRun: true }).catch((e: unknown) => e);
    expect(stale).toBeInstanceOf(CommandFailed);
    expect((stale as CommandFailed).code).toBe("stale_ref");
  });
});
