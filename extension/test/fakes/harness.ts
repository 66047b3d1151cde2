/**
 * Builds a ProfileClient over the fakes and drives the device and session sockets the way the
 * backend would. A "service-worker restart" is a new harness over the same FakeStorage.
 */
import { ENROLLMENT_KEY } from "../../src/config/enrollment";
import type { LocalOriginPolicy } from "@understudy/protocol";
import { RedactingLogger } from "../../src/log";
import { ProfileClient } from "../../src/profile/profileClient";
import { FakeChrome, type FakeStorage, newStorage } from "./fakeChrome";
import { type FakeSocket, fakeSockets } from "./fakeSocket";

export const SERVICE_ORIGIN = "http://127.0.0.1:8787";
export const CREDENTIAL = "udc_Z3JlYXQtc2VjcmV0LWNyZWRlbnRpYWwtdmFsdWU";
export const DEVICE_TICKET = "ust1.device-ticket.sig";
export const LEASE_A = { leaseId: "0b8e2a44-6d0f-4d39-8f0c-5a9d1c7e3f21", sessionId: "7d0c4f5e-3b7a-4f0e-9a51-2f7f2a6b9c10" };
export const LEASE_B = { leaseId: "1c9f3b55-7e10-4e4a-9f1d-6b0e2d8f4a32", sessionId: "8e1d5a6f-4c8b-4a1f-8b62-3a8a3b7cad21" };

export interface FetchCall {
  readonly url: string;
  readonly init: RequestInit;
}

export interface Harness {
  readonly chrome: FakeChrome;
  readonly sockets: FakeSocket[];
  readonly fetches: FetchCall[];
  readonly logs: string[];
  readonly profile: ProfileClient;
  readonly store: FakeStorage;
  readonly log: RedactingLogger;
}

export interface HarnessOptions {
  readonly store?: FakeStorage;
  readonly fetchStatus?: () => number;
  readonly random?: () => number;
  readonly now?: () => number;
  /** The socketUrl the fake backend returns with the device ticket. */
  readonly socketUrl?: string;
  /** The write settle window; 0 (none) unless a test is about it. */
  readonly settleMs?: number;
  /** Whether the extension keeps a spare window ready (as it does in Chrome); off unless a test is about it. */
  readonly spareWindow?: boolean;
}

let idCounter = 0;

/** Deterministic UUIDs, unique across harnesses. */
export function nextUuid(): string {
  idCounter += 1;
  return `00000000-0000-4000-8000-${idCounter.toString(16).padStart(12, "0")}`;
}

export function enroll(store: FakeStorage, policy: LocalOriginPolicy = { mode: "any" }): void {
  store.local.data.set(ENROLLMENT_KEY, { serviceOrigin: SERVICE_ORIGIN, deviceId: "laptop-1", credential: CREDENTIAL, enabled: true, localOriginPolicy: policy });
}

export function makeHarness(options: HarnessOptions = {}): Harness {
  const store = options.store ?? newStorage();
  const chrome = new FakeChrome(store);
  const { factory, sockets } = fakeSockets();
  const fetches: FetchCall[] = [];
  const logs: string[] = [];
  const fetchImpl = (url: string, init: RequestInit): Promise<Response> => {
    fetches.push({ url, init });
    const status = options.fetchStatus?.() ?? 200;
    const body = {
      ticket: DEVICE_TICKET,
      socketUrl: options.socketUrl ?? `ws://127.0.0.1:8787/v1/device/socket?ticket=${DEVICE_TICKET}`,
      expiresAt: "2026-11-30T09:01:00Z",
    };
    return Promise.resolve({
      ok: status >= 200 && status < 300,
      status,
      headers: new Headers(),
      json: () => Promise.resolve(body),
    } as Response);
  };
  const log = new RedactingLogger((_level, line) => logs.push(line));
  const profile = new ProfileClient({
    chrome,
    socketFactory: factory,
    fetch: fetchImpl,
    log,
    newId: nextUuid,
    settleMs: options.settleMs ?? 0,
    spareWindow: options.spareWindow ?? false,
    spareReopenDelayMs: 0,
    ...(options.random === undefined ? {} : { random: options.random }),
    ...(options.now === undefined ? {} : { now: options.now }),
  });
  return { chrome, sockets, fetches, logs, profile, store, log };
}

/** One macrotask turn that fake timers do not control (a MessageChannel message). */
function macrotask(): Promise<void> {
  return new Promise<void>((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => {
      channel.port1.close();
      resolve();
    };
    channel.port2.postMessage(null);
  });
}

/** Lets pending promise chains run; works with real and fake timers alike. */
export async function settle(rounds = 8): Promise<void> {
  for (let i = 0; i < rounds; i += 1) await macrotask();
}

/** Starts the client, opens its device socket and welcomes it. */
export async function connectDevice(h: Harness): Promise<FakeSocket> {
  await h.profile.start();
  await settle();
  const device = h.sockets.at(-1);
  if (device === undefined) throw new Error("no device socket opened");
  device.open();
  device.receive({ type: "welcome", deviceId: "laptop-1", protocolVersion: 2, connectionEpoch: 1, heartbeatIntervalMs: 22000, serverTime: "2026-11-30T09:00:00Z" });
  await settle();
  return device;
}

export interface Provisioned {
  readonly tabId: number;
  readonly session: FakeSocket;
}

/** Opens the session socket of a lease the extension holds and acknowledges its hello. */
export async function openSession(
  h: Harness,
  device: FakeSocket,
  lease: { leaseId: string; sessionId: string },
  ack: { cancel?: string[]; unknown?: string[]; writesBlocked?: boolean; leaseEpoch?: number } = {},
): Promise<FakeSocket> {
  const leaseEpoch = ack.leaseEpoch ?? 1;
  device.receive({
    type: "session_ticket",
    sessionId: lease.sessionId,
    leaseId: lease.leaseId,
    leaseEpoch,
    ticket: `ust1.session-${lease.sessionId}.sig`,
    socketUrl: `ws://127.0.0.1:8787/v1/sessions/${lease.sessionId}/socket`,
    expiresAt: "2026-11-30T09:01:00Z",
  });
  await settle();
  const session = h.sockets.at(-1);
  if (session === undefined || !session.url.includes(lease.sessionId)) throw new Error("no session socket opened");
  session.open();
  await settle();
  session.receive({
    type: "hello_ack",
    sessionId: lease.sessionId,
    leaseEpoch,
    cancel: ack.cancel ?? [],
    unknown: ack.unknown ?? [],
    writesBlocked: ack.writesBlocked ?? false,
  });
  await settle();
  return session;
}

/** Provisions an unattended lease and opens its session socket. */
export async function provision(
  h: Harness,
  device: FakeSocket,
  lease: { leaseId: string; sessionId: string },
  allowedOrigins: string[] = ["https://example.com"],
): Promise<Provisioned> {
  device.receive({ type: "provision", ...lease, leaseEpoch: 1, allowedOrigins, deadlineAt: "2026-11-30T09:00:30Z" });
  await settle();
  const ack = device.framesOf("provision_ack").find((f) => f.leaseId === lease.leaseId);
  if (ack?.outcome !== "provisioned") throw new Error(`provision refused: ${JSON.stringify(ack)}`);
  const session = await openSession(h, device, lease);
  return { tabId: ack.tabId as number, session };
}

export const FUTURE = "2099-01-01T00:00:00Z";
