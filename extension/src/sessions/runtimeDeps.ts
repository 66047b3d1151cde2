/**
 * What a SessionRuntime needs from the rest of the service worker. Passed in, never imported, so
 * a test builds a runtime with fakes.
 */
import type { ChromeFacade } from "../chrome/facade";
import type { Capability, DeviceClientFrame, LocalOriginPolicy } from "@understudy/protocol";
import type { Logger } from "../log";
import type { SocketFactory } from "../net/socket";
import type { HealthCounters } from "../profile/health";
import type { LeaseStore } from "./leaseStore";

export interface RuntimeDeps {
  readonly chrome: ChromeFacade;
  readonly socketFactory: SocketFactory;
  readonly log: Logger;
  readonly health: HealthCounters;
  readonly leases: LeaseStore;
  readonly capabilities: readonly Capability[];
  /** Asks the profile client to send the accumulated health counters. */
  emitHealth(): void;
  /** The browser epoch in force now. */
  browserEpoch(): string;
  localPolicy(): LocalOriginPolicy;
  serviceOrigin(): string | undefined;
  /** Whether this runtime object is still the one the manager indexes for its session. */
  isCurrent(runtime: object): boolean;
  newId(): string;
  now(): number;
  /** Sends a frame on the device socket; false when it is not open. */
  sendDevice(frame: DeviceClientFrame): boolean;
  /** Uniform random in [0, 1) for retry jitter; Math.random when absent. */
  readonly random?: () => number;
  /** Admits a controlled tab's document URL to the popup fence (see popupFence.ts); none when absent. */
  admitDocument?(url: string): Promise<void>;
  /** How long after a write acted the page's reaction is attributed to it; BLOCK_SETTLE_MS when absent. */
  readonly settleMs?: number;
}
