/**
 * The tab's latest snapshot, kept so that `changesSince` can say what changed. Only the latest is
 * kept: a model asks for changes since the snapshot it just read. It lives in memory, so a
 * restarted service worker answers `unavailable` and sends a full snapshot, never a wrong diff.
 */
import type { SnapshotChanges } from "@understudy/protocol";

export interface Remembered {
  readonly id: string;
  readonly generation: number;
  /** Compact lines by key (see `lineKeys`), when the snapshot had the compact form. */
  readonly lines?: ReadonlyMap<string, string>;
  /** Structured nodes by key, when the snapshot had them. */
  readonly nodes?: ReadonlyMap<string, string>;
}

const SNAPSHOT_ID = /^g(\d{1,9})s(\d{1,9})$/;

export type Recall =
  | { readonly status: "compared"; readonly base: Remembered }
  | { readonly status: Exclude<SnapshotChanges["status"], "compared"> };

export class SnapshotMemory {
  private counter = 0;
  private latest: Remembered | undefined;

  /** A new id in this document: `g<generation>s<n>`. */
  nextId(generation: number): string {
    this.counter += 1;
    return `g${String(generation)}s${String(this.counter)}`;
  }

  remember(snapshot: Remembered): void {
    this.latest = snapshot;
  }

  /** The snapshot `id` names, if it is still the latest of the current document. */
  recall(id: string, generation: number): Recall {
    const match = SNAPSHOT_ID.exec(id);
    const ofGeneration = match === null ? undefined : Number(match[1]);
    if (ofGeneration !== undefined && ofGeneration < generation) return { status: "navigated" };
    const latest = this.latest;
    if (latest === undefined || latest.id !== id || latest.generation !== generation) return { status: "unavailable" };
    return { status: "compared", base: latest };
  }
}
