/**
 * The dialog outbox of one session: each dialog is persisted here before it is answered, sent,
 * and removed only after `dialog_ack`. Bounded to 256 records and 256 KiB; a dialog that does not
 * fit (or whose persistence fails) is still answered by the caller, but only counted.
 */
import type { StorageArea } from "../chrome/facade";
import { DIALOG_OUTBOX_MAX_BYTES, DIALOG_OUTBOX_MAX_RECORDS } from "../constants";
import type { DialogRecord } from "@understudy/protocol";
import { SerialChain } from "./serialChain";

export function outboxKey(sessionId: string): string {
  return `outbox:${sessionId}`;
}

export type OutboxAddResult = "persisted" | "overflow";

function byteLength(records: readonly DialogRecord[]): number {
  return new TextEncoder().encode(JSON.stringify(records)).length;
}

export class DialogOutbox {
  private records: DialogRecord[] = [];
  private readonly chain = new SerialChain();
  /** Set once a dialog could not be persisted; shown to the operator until the lease ends. */
  overflowed = false;

  constructor(
    private readonly area: StorageArea,
    private readonly sessionId: string,
  ) {}

  /** Loads the persisted records; `items`, when given, is a storage read that included this key. */
  async load(items?: Readonly<Record<string, unknown>>): Promise<void> {
    await this.chain.run(async () => {
      const stored = (items ?? (await this.area.get([outboxKey(this.sessionId)])))[outboxKey(this.sessionId)];
      this.records = Array.isArray(stored) ? (stored as DialogRecord[]) : [];
    });
  }

  pending(): readonly DialogRecord[] {
    return this.records;
  }

  /** Persists a record, or reports overflow (limits reached or storage failed). Never throws. */
  add(record: DialogRecord): Promise<OutboxAddResult> {
    return this.chain.run(async () => {
      const next = [...this.records, record];
      if (next.length > DIALOG_OUTBOX_MAX_RECORDS || byteLength(next) > DIALOG_OUTBOX_MAX_BYTES) {
        this.overflowed = true;
        return "overflow";
      }
      try {
        await this.area.set({ [outboxKey(this.sessionId)]: next });
      } catch {
        this.overflowed = true;
        return "overflow";
      }
      this.records = next;
      return "persisted";
    });
  }

  /** Drops an acknowledged dialog. */
  async remove(dialogId: string): Promise<void> {
    await this.chain.run(async () => {
      const next = this.records.filter((r) => r.dialogId !== dialogId);
      if (next.length === this.records.length) return;
      await this.area.set({ [outboxKey(this.sessionId)]: next });
      this.records = next;
    });
  }

  async clear(): Promise<void> {
    await this.chain.run(async () => {
      this.records = [];
      await this.area.remove([outboxKey(this.sessionId)]);
    });
  }
}
