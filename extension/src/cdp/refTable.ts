/**
 * Element refs of one tab: `g<generation>e<n>`, each naming a backendDOMNodeId. A new document
 * bumps the generation and forgets every ref, so a ref from an earlier document is refused as
 * stale, never resolved to whatever now has that number.
 *
 * Generations are short because they count: a session's first tab starts at 1 (no ref of the
 * session exists before it), a runtime restored after a service-worker restart starts above the
 * last generation it recorded, and only a tab provisioned again after a browser restart (whose
 * earlier tab's refs this runtime cannot know) starts from the clock, above every count a tab
 * reaches. For the restored case to hold, a generation is handed out in refs only once it is
 * recorded (`whenRecorded`): a worker that dies right after a new document cannot come back
 * below refs it already gave.
 */
import { CommandError } from "../errors";

export interface RefTarget {
  readonly backendNodeId: number;
  readonly role: string;
  readonly name: string;
}

const REF_PATTERN = /^g(\d{1,9})e(\d{1,9})$/;
export const MAX_GENERATION = 999_999_999;
/** Clock-derived generations start here: no tab counts a million documents. */
const CLOCK_FLOOR = 1_000_000;
const GENERATION_CLOCK_SPAN = 900_000_000;
const GENERATION_CLOCK_UNIT_MS = 100;

/**
 * The first generation of a new (not restored) runtime. Lease epoch 1 is the session's first
 * tab: it counts from 1. A higher epoch means the browser restarted and the session's tab was
 * provisioned again; its earlier tab may have issued any count, so this one starts from the clock
 * (tenths of a second), above `CLOCK_FLOOR` and above what an earlier restart started from.
 */
export function firstGeneration(leaseEpoch: number, nowMs: number): number {
  if (leaseEpoch <= 1) return 1;
  return CLOCK_FLOOR + (Math.floor(nowMs / GENERATION_CLOCK_UNIT_MS) % GENERATION_CLOCK_SPAN);
}

export class RefTable {
  private current: number;
  private next = 1;
  private readonly byRef = new Map<string, RefTarget>();
  private readonly byNode = new Map<number, string>();
  /** The latest generation known to be in durable storage (the one constructed with is). */
  private recordedGeneration: number;
  private waiters: (() => void)[] = [];

  constructor(generation: number) {
    this.current = Math.max(1, Math.min(generation, MAX_GENERATION));
    this.recordedGeneration = this.current;
  }

  /** `generation` is in durable storage now (or could not be put there and never will be). */
  recorded(generation: number): void {
    this.recordedGeneration = generation;
    if (generation !== this.current) return;
    const waiting = this.waiters;
    this.waiters = [];
    for (const resolve of waiting) resolve();
  }

  /** Resolves once the current generation is recorded: refs of it may then be handed out. */
  whenRecorded(): Promise<void> {
    if (this.recordedGeneration === this.current) return Promise.resolve();
    return new Promise((resolve) => {
      this.waiters.push(resolve);
    });
  }

  get generation(): number {
    return this.current;
  }

  /** A new document replaced the old one: retire every ref. */
  newDocument(): void {
    this.current = this.current >= MAX_GENERATION ? 1 : this.current + 1;
    this.next = 1;
    this.byRef.clear();
    this.byNode.clear();
  }

  /** The ref of a node in the current generation, minting one if needed. */
  mint(target: RefTarget): string {
    const existing = this.byNode.get(target.backendNodeId);
    if (existing !== undefined) {
      this.byRef.set(existing, target);
      return existing;
    }
    const ref = `g${this.current}e${this.next}`;
    this.next += 1;
    this.byRef.set(ref, target);
    this.byNode.set(target.backendNodeId, ref);
    return ref;
  }

  /** Resolves a ref of the current generation; refuses stale or unknown refs with an actionable error. */
  resolve(ref: string): RefTarget {
    const match = REF_PATTERN.exec(ref);
    if (match === null) {
      throw new CommandError("invalid_arguments", `${ref.slice(0, 32)} is not a ref; use a ref such as g2e14 from the latest snapshot.`);
    }
    const generation = Number(match[1]);
    if (generation > this.current) {
      // Generations only grow within a tab (and a restarted runtime starts above the last one),
      // so this number was never handed out here: a ref made up, mistyped, or from another tab.
      // (A wrap past MAX_GENERATION would take some 100 million documents in one tab.)
      throw new CommandError(
        "stale_ref",
        `Ref ${ref} names generation ${generation}, which this tab never issued (its current document is generation ${this.current}); take a snapshot and use its refs.`,
      );
    }
    if (generation !== this.current) {
      throw new CommandError("stale_ref", `Ref ${ref} belongs to an earlier document; take a new snapshot and use its refs.`);
    }
    const target = this.byRef.get(ref);
    if (target === undefined) {
      throw new CommandError("ref_not_found", `Ref ${ref} is not in the latest snapshot; take a new snapshot and use its refs.`);
    }
    return target;
  }
}
