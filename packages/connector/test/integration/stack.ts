/**
 * The integration tests' view of the running stack: a fresh backend per test, its simulated
 * devices, and the connector's exchanges and waits as recorded on the way.
 */
import { inject } from "vitest";

import { Client, type ClientOptions, type ConnectorEvent } from "../../src/index.js";

export const ORIGINS = ["https://example.com"];

/** Ask the stack for something (tests/connector/integration/ts_stack.py lists the routes). */
export async function control<T = Record<string, unknown>>(route: string, body: Record<string, unknown> = {}): Promise<T> {
  const response = await fetch(`${inject("control")}${route}`, { method: "POST", body: JSON.stringify(body) });
  const answer = (await response.json()) as T & { error?: string };
  if (!response.ok) throw new Error(`stack ${route}: ${answer.error ?? response.status}`);
  return answer;
}

/** One HTTP exchange the connector made. */
export interface Exchange {
  readonly method: string;
  readonly path: string;
  readonly headers: Headers;
  readonly body: Record<string, unknown> | undefined;
  readonly status: number;
}

/** A running backend for one test. */
export class Live {
  readonly exchanges: Exchange[] = [];
  /** Every wait the connector asked for, in seconds. */
  readonly delays: number[] = [];
  readonly #watches: { match: (e: ConnectorEvent) => boolean; then: () => Promise<unknown>; done: (v: void) => void }[] = [];

  private constructor(
    readonly url: string,
    readonly apiKey: string,
  ) {}

  static async start(): Promise<Live> {
    const { url, apiKey } = await control<{ url: string; apiKey: string }>("/reset");
    return new Live(url, apiKey);
  }

  /** A client on the real fetch, recording exchanges; its waits are noted and take 20 ms. */
  client(options: Partial<ClientOptions> = {}): Client {
    return new Client({
      baseUrl: this.url,
      apiKey: this.apiKey,
      fetch: this.#recording,
      sleep: async (seconds) => {
        this.delays.push(seconds);
        await new Promise((resolve) => setTimeout(resolve, 20));
      },
      onEvent: async (event) => {
        for (const watch of [...this.#watches]) {
          if (watch.match(event)) {
            this.#watches.splice(this.#watches.indexOf(watch), 1);
            await watch.then(); // before the connector's next step
            watch.done();
          }
        }
      },
      ...options,
    });
  }

  /** Resolves on the first answer with this status (and problem code), after running `then`. */
  when(status: number, code?: string, then: () => Promise<unknown> = () => Promise.resolve()): Promise<void> {
    return new Promise((done) => {
      this.#watches.push({
        match: (e) => e.type === "response" && e.status === status && (code === undefined || e.code === code),
        then,
        done,
      });
    });
  }

  device(
    options: { behaviour?: Record<string, unknown>; withoutCapabilities?: string[]; name?: string; connect?: boolean } = {},
  ): Promise<unknown> {
    return control("/device", options);
  }

  commands(commandId?: string): Exchange[] {
    return this.exchanges.filter(
      (e) => e.method === "POST" && e.path.endsWith("/commands") && (commandId === undefined || e.body?.commandId === commandId),
    );
  }

  polls(commandId: string): Exchange[] {
    return this.exchanges.filter((e) => e.method === "GET" && e.path.endsWith(`/${commandId}`));
  }

  creations(): Exchange[] {
    return this.exchanges.filter((e) => e.method === "POST" && e.path === "/v1/sessions");
  }

  readonly #recording = (async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const response = await fetch(input, init);
    const url = new URL(input instanceof Request ? input.url : input);
    const text = typeof init?.body === "string" ? init.body : undefined;
    this.exchanges.push({
      method: init?.method ?? "GET",
      path: url.pathname,
      headers: new Headers(init?.headers),
      body: text === undefined ? undefined : (JSON.parse(text) as Record<string, unknown>),
      status: response.status,
    });
    return response;
  }) as typeof fetch;
}

/** The simulated device's view: executions by command id, session frames, leases ever held. */
export function deviceState(name = "laptop-1"): Promise<{
  executions: Record<string, number>;
  frames: { type: string; commandId: string | null }[];
  leases: string[];
}> {
  return control("/state", { name });
}

/** Wait until the session's socket is up (its hello acknowledged). */
export function socketUp(sessionId: string): Promise<unknown> {
  return control("/wait-frame", { sessionId, frame: "hello_ack" });
}

/** Wait until the device has really executed `count` writes; the id of the last one. */
export async function granted(count = 1): Promise<string> {
  return (await control<{ commandId: string }>("/granted", { count })).commandId;
}
