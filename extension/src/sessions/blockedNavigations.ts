/**
 * What the page of one controlled tab tried and the extension stopped: navigations to origins the
 * session does not allow, and popups. Each stop becomes a `BlockedNavigation` record that is
 * (1) sent on the session socket for the session status, (2) collected into the result of the
 * command whose run or settle window it fell into, and (3) remembered as "the tab shows the block
 * page" until the next real document commits, so `hello`, `get_tabs` and `snapshot` can say so.
 * Records carry origins only, never full URLs; they go to the tenant's consumer, never to logs.
 */
import type { BlockedNavigation, NavigationBlockCause } from "@understudy/protocol";

/** Records kept per command window; the spec bounds `blockedNavigations` at 50. */
export const MAX_BLOCKED_PER_COMMAND = 50;

export interface BlockedNavigationsDeps {
  newId(): string;
  now(): number;
  /** Sends the record on the session socket (best effort: dropped while it is down). */
  report(record: BlockedNavigation): void;
}

/** `URL.origin`, or "null" for URLs without one (about:blank, data:, unparsable). */
export function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return "null";
  }
}

export class BlockedNavigations {
  private window: { readonly commandId: string; readonly records: BlockedNavigation[] } | undefined;
  private shown: BlockedNavigation | undefined;

  constructor(private readonly deps: BlockedNavigationsDeps) {}

  /** Records one stop; a stopped main-frame navigation also leaves the block page showing. */
  record(kind: BlockedNavigation["kind"], url: string, cause: NavigationBlockCause): BlockedNavigation {
    const window = this.window;
    const record: BlockedNavigation = {
      blockedId: this.deps.newId(),
      kind,
      origin: originOf(url),
      cause,
      blockedAt: new Date(this.deps.now()).toISOString(),
      ...(window === undefined ? {} : { commandId: window.commandId }),
    };
    if (window !== undefined && window.records.length < MAX_BLOCKED_PER_COMMAND) window.records.push(record);
    if (kind === "navigation") this.shown = record;
    this.deps.report(record);
    return record;
  }

  /** Starts attributing stops to `commandId` (commands run one at a time). */
  open(commandId: string): void {
    this.window = { commandId, records: [] };
  }

  /** Ends the window opened last; returns its records, oldest first. */
  close(): BlockedNavigation[] {
    const records = this.window?.records ?? [];
    this.window = undefined;
    return records;
  }

  /**
   * A main-frame document committed. Chromium's block page is an error page (it commits with an
   * `unreachableUrl`), so it keeps the record showing; any other document clears it.
   */
  documentCommitted(isErrorPage: boolean): void {
    if (!isErrorPage) this.shown = undefined;
  }

  /** The stop whose block page the tab shows now, if any. */
  get showing(): BlockedNavigation | undefined {
    return this.shown;
  }
}
