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
  /**
   * At least the ref generation last in force (a ceiling recorded ahead, see
   * SessionRuntime.recordGeneration), so a restarted runtime, which starts above it, never reuses one.
   */
  readonly generation: number;
  readonly browserEpoch: string;
}

/**
 * The service worker keeps one LeaseStore, the only writer of LEASES_KEY (a worker restart or a
 * browser restart starts a new store, and chrome.storage.session is per extension). So after the
 * first read it keeps what storage holds in memory, updated only once a write succeeded, and reads
 * storage no more; a change that leaves the list as it is writes nothing.
 */
export class LeaseStore {
  private readonly chain = new SerialChain();
  private records: readonly LeaseRecord[] | undefined;

  constructor(private readonly area: StorageArea) {}

  load(): Promise<LeaseRecord[]> {
    return this.chain.run(async () => [...(await this.read())]);
  }

  put(record: LeaseRecord): Promise<void> {
    return this.chain.run(async () => {
      const records = await this.read();
      await this.write(records, [...records.filter((r) => r.leaseId !== record.leaseId), record]);
    });
  }

  remove(leaseId: string): Promise<void> {
    return this.chain.run(async () => {
      const records = await this.read();
      await this.write(records, records.filter((r) => r.leaseId !== leaseId));
    });
  }

  private async read(): Promise<readonly LeaseRecord[]> {
    if (this.records === undefined) {
      const stored = (await this.area.get([LEASES_KEY]))[LEASES_KEY];
      this.records = Array.isArray(stored) ? (stored as LeaseRecord[]) : [];
    }
    return this.records;
  }

  private async write(current: readonly LeaseRecord[], next: readonly LeaseRecord[]): Promise<void> {
    if (JSON.stringify(next) === JSON.stringify(current)) return;
    await this.area.set({ [LEASES_KEY]: next });
    this.records = next;
  }
}
