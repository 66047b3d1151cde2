/**
 * Leases this extension holds, persisted in chrome.storage.session so a restarted service worker
 * can rebuild its runtimes in the same browser epoch. Records hold ids, epochs and origins only.
 */
import type { StorageArea } from "../chrome/facade";
import { SerialChain } from "./serialChain";

export const LEASES_KEY = "leases";

export type SessionMode = "attended" | "unattended";

export interface LeaseRecord {
  readonly leaseId: string;
  readonly sessionId: string;
  readonly leaseEpoch: number;
  readonly tabId: number;
  readonly mode: SessionMode;
  /** The session's allowed origins; absent when the session sets none (attended). */
  readonly allowedOrigins?: readonly string[];
  /** The ref generation last in force, so a restarted runtime never reuses it. */
  readonly generation: number;
  readonly browserEpoch: string;
}

export class LeaseStore {
  private readonly chain = new SerialChain();

  constructor(private readonly area: StorageArea) {}

  load(): Promise<LeaseRecord[]> {
    return this.chain.run(() => this.read());
  }

  put(record: LeaseRecord): Promise<void> {
    return this.chain.run(async () => {
      const records = (await this.read()).filter((r) => r.leaseId !== record.leaseId);
      await this.area.set({ [LEASES_KEY]: [...records, record] });
    });
  }

  remove(leaseId: string): Promise<void> {
    return this.chain.run(async () => {
      const records = (await this.read()).filter((r) => r.leaseId !== leaseId);
      await this.area.set({ [LEASES_KEY]: records });
    });
  }

  private async read(): Promise<LeaseRecord[]> {
    const stored = (await this.area.get([LEASES_KEY]))[LEASES_KEY];
    return Array.isArray(stored) ? (stored as LeaseRecord[]) : [];
  }
}
