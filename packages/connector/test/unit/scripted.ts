/**
 * A scripted Understudy backend behind a fake `fetch`, and a fake clock: the TypeScript twin of
 * tests/connector/scripted.py. Steps come from the shared table tests/connector/scenarios.json;
 * every body is checked with the generated zod schemas before it is played, so a script cannot
 * play a shape the spec does not allow.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { CommandOutcome, CommandPending, Problem, Session, SessionTombstone } from "@understudy/protocol/zod";

import { Client, type RetryConfig } from "../../src/index.js";

export const TABLE_PATH = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "..", "tests", "connector", "scenarios.json");
export const BASE_URL = "http://understudy.test";
export const API_KEY = "usk_test_key";
export const TIMESTAMP = "2026-11-30T09:00:00Z";

export type StepSpec = { reply: string } & Record<string, unknown>;

export interface ScenarioRow {
  readonly id: string;
  readonly command?: string;
  readonly retry?: Partial<RetryConfig>;
  readonly steps: readonly StepSpec[];
  readonly outcome: { readonly status?: string; readonly error?: string };
  readonly calls: readonly string[];
  readonly sleeps: readonly number[];
}

export interface Table {
  readonly sessionId: string;
  readonly commands: Readonly<Record<string, Record<string, unknown>>>;
  readonly createBody: Record<string, unknown>;
  readonly submitCommand: readonly ScenarioRow[];
  readonly createSession: readonly ScenarioRow[];
}

export const TABLE = JSON.parse(readFileSync(TABLE_PATH, "utf8")) as Table;
export const SESSION_ID = TABLE.sessionId;

/** One request the backend received. */
export interface Recorded {
  readonly method: string;
  readonly url: URL;
  readonly headers: Headers;
  readonly body: Record<string, unknown> | undefined;
}

export function commandIdOf(request: Recorded): string {
  if (request.method === "POST") return String(request.body?.commandId);
  return request.url.pathname.split("/").at(-1) ?? "";
}

type Step = (request: Recorded) => Response;

function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json", ...headers } });
}

const READ_RESULTS: Record<string, unknown> = {
  snapshot: {
    name: "snapshot",
    url: "https://example.com/login",
    title: "Sign in",
    generation: 2,
    truncated: false,
    nodes: [
      { role: "RootWebArea", name: "Sign in", depth: 0 },
      { ref: "g2e5", role: "textbox", name: "Username", depth: 1 },
      { ref: "g2e7", role: "button", name: "Sign in", depth: 1 },
    ],
  },
};

function resultFor(name: string): unknown {
  return READ_RESULTS[name] ?? { name, url: "https://example.com/home", title: "Home", generation: 3 };
}

/** The step a row of the table describes. */
export function step(spec: StepSpec): Step {
  const get = <T>(key: string, fallback: T): T => (key in spec ? (spec[key] as T) : fallback);
  switch (spec.reply) {
    case "network_error":
      return () => {
        throw new TypeError("fetch failed", { cause: new Error("connect ECONNREFUSED") });
      };
    case "outcome":
      return (request) => {
        const name = get("name", "snapshot");
        const status = get("status", "succeeded");
        const error = get<[string, string] | undefined>("error", undefined);
        const body: Record<string, unknown> = {
          commandId: commandIdOf(request),
          name,
          status,
          dryRun: Boolean(request.body?.dryRun),
          completedAt: TIMESTAMP,
        };
        if (status === "succeeded") body.result = resultFor(name);
        if (error !== undefined) body.error = { code: error[0], message: error[1] };
        return json(200, CommandOutcome.parse(body));
      };
    case "pending":
      return (request) => {
        const commandId = commandIdOf(request);
        const retryAfter = get<number | null>("retryAfter", 1);
        const location = get<string | null>("location", "");
        const headers: Record<string, string> = {};
        if (retryAfter !== null) headers["Retry-After"] = String(retryAfter);
        if (location !== null) headers.Location = location || `/v1/sessions/${SESSION_ID}/commands/${commandId}`;
        const body = { commandId, name: get("name", "snapshot"), status: get("status", "pending"), retryPolicy: "poll_same_command" };
        return json(202, CommandPending.parse(body), headers);
      };
    case "problem":
      return (request) => {
        const code = String(spec.code);
        const status = Number(spec.status);
        const body: Record<string, unknown> = {
          type: `https://understudy.dev/problems/${code}`,
          title: code.replaceAll("_", " "),
          status,
          code,
          detail: `scripted ${code}`,
        };
        if (get("withCommandId", true) && request.url.pathname.includes("/commands")) body.commandId = commandIdOf(request);
        const headers: Record<string, string> = { "Content-Type": "application/problem+json" };
        const retryAfter = get<number | undefined>("retryAfter", undefined);
        if (retryAfter !== undefined) headers["Retry-After"] = String(retryAfter);
        return new Response(JSON.stringify(Problem.parse(body)), { status, headers });
      };
    case "raw":
      return () =>
        new Response(String(spec.body), {
          status: Number(spec.status),
          headers: { "Content-Type": get("contentType", "application/json") },
        });
    case "session":
      return () => {
        const headers: Record<string, string> = {};
        const retryAfter = get<number | undefined>("retryAfter", undefined);
        if (retryAfter !== undefined) headers["Retry-After"] = String(retryAfter);
        if (get("location", false)) headers.Location = `/v1/sessions/${SESSION_ID}`;
        const body = {
          sessionId: SESSION_ID,
          mode: "unattended",
          status: get("status", "connected"),
          deviceId: "laptop-1",
          allowedOrigins: ["https://example.com"],
          createdAt: TIMESTAMP,
          expiresAt: "2026-12-01T09:00:00Z",
          idleExpiresAt: "2026-11-30T11:00:00Z",
          commandCount: 0,
          writesBlocked: false,
          dialogs: [],
        };
        return json(get("code", 201), Session.parse(body), headers);
      };
    case "tombstone":
      return () => {
        const body = { sessionId: SESSION_ID, status: get("status", "closed"), endedAt: TIMESTAMP, reason: get("reason", "deleted") };
        return json(get("code", 200), SessionTombstone.parse(body));
      };
    default:
      throw new Error(`scenarios.json: unknown reply ${spec.reply}`);
  }
}

/** Answers requests with `steps`, in order; a request past the script fails the test. */
export class ScriptedBackend {
  readonly requests: Recorded[] = [];
  readonly #steps: Step[];

  constructor(steps: readonly (Step | StepSpec)[]) {
    this.#steps = steps.map((s) => (typeof s === "function" ? s : step(s)));
  }

  get remaining(): number {
    return this.#steps.length;
  }

  readonly fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = new URL(input instanceof Request ? input.url : input);
    const text = typeof init?.body === "string" ? init.body : undefined;
    const recorded: Recorded = {
      method: init?.method ?? "GET",
      url,
      headers: new Headers(init?.headers),
      body: text === undefined ? undefined : (JSON.parse(text) as Record<string, unknown>),
    };
    this.requests.push(recorded);
    const next = this.#steps.shift();
    if (next === undefined) throw new Error(`unscripted request: ${recorded.method} ${url.toString()}`);
    return Promise.resolve(next(recorded));
  };
}

/** A monotonic clock that only moves when the connector sleeps. */
export class FakeClock {
  now = 1000;
  readonly sleeps: number[] = [];
  readonly read = (): number => this.now;
  readonly sleep = (seconds: number): Promise<void> => {
    this.sleeps.push(seconds);
    this.now += seconds;
    return Promise.resolve();
  };
}

/** A client on a scripted backend and a fake clock. */
export function scripted(
  steps: readonly (Step | StepSpec)[],
  retry: Partial<RetryConfig> = {},
): { client: Client; backend: ScriptedBackend; clock: FakeClock } {
  const backend = new ScriptedBackend(steps);
  const clock = new FakeClock();
  const client = new Client({
    baseUrl: BASE_URL,
    apiKey: API_KEY,
    retry,
    fetch: backend.fetch,
    sleep: clock.sleep,
    clock: clock.read,
  });
  return { client, backend, clock };
}
