/**
 * One controlled tab: its CDP attachment, its session socket, its command flow (the FIFO
 * single-flight command queue and the write journal, see `commandFlow.ts`), the dialog outbox and
 * the record of what the page tried that was blocked. Frame handlers are a `switch` over the
 * generated session-frame union with a `never` default.
 */
import { ControlledTab, type DialogOpeningParams } from "../cdp/controlledTab";
import { NavigationWatch, type PageSeen, pageSeenOf } from "../cdp/navigationWatch";
import type { AuthorityCheck } from "../cdp/cdpSession";
import { MAX_GENERATION, firstGeneration } from "../cdp/refTable";
import type { CommandContext } from "../commands/context";
import { OriginPolicy } from "../config/origins";
import { BLOCK_SETTLE_MS, BLOCK_SETTLE_MAX_MS, BLOCK_SETTLE_PAGE_MS, SESSION_PROTOCOL_VERSION, SESSION_TICKET_MAX_REQUESTS } from "../constants";
import { CommandError, StaleAuthorityError } from "../errors";
import { CLOSE_NOT_AUTHORITATIVE, CLOSE_REVOKED, READ_DEADLINE_MS } from "@understudy/protocol";
import type {
  BlockedNavigation,
  DeviceServerSessionTicket,
  DialogRecord,
  SessionClientFrame,
  SessionServerFrame,
  SessionServerHelloAck,
  TabInfo,
} from "@understudy/protocol";
import { FrameSocket } from "../net/socket";
import { socketUrlMatchesService, withTicket } from "../net/urls";
import { reconnectDelayMs } from "../profile/backoff";
import { decodeSessionServerFrame } from "../protocol/decode";
import { DialogOutbox, outboxKey } from "./dialogOutbox";
import { BlockedNavigations } from "./blockedNavigations";
import type { LeaseRecord, SessionMode } from "./leaseStore";
import type { RuntimeDeps } from "./runtimeDeps";
import { CommandFlow, type CommandHost, type SettleKind } from "./commandFlow";
import { SerialChain } from "./serialChain";
import { journalKey } from "./writeJournal";

const MAX_TAB_URL = 8192;
/**
 * Ref generations the lease record covers ahead of the current one: a restarted runtime starts
 * above the record, so above every generation handed out, and a tab writes its lease record once
 * per this many documents instead of on each.
 */
export const GENERATION_RESERVE = 16;

/** The ceiling a lease record holds for a tab at `generation`. */
function reserveAbove(generation: number): number {
  return Math.min(generation + GENERATION_RESERVE - 1, MAX_GENERATION);
}
const MAX_TAB_TITLE = 4096;
const MAX_DIALOG_TEXT = 4096;
/** The settle window's round trip through the page's task queue, answering what the page shows then. */
export const PAGE_TASK_EXPRESSION = "new Promise((resolve) => setTimeout(() => resolve({ href: location.href, title: document.title }), 0))";
/** The hello's tab lookup gets as long as a read. */
const HELLO_TAB_DEADLINE_MS = READ_DEADLINE_MS;

/** What the panel shows about one runtime: ids and state, never URLs or titles. */
export interface RuntimeView {
  readonly sessionId: string;
  readonly leaseEpoch: number;
  readonly tabId: number;
  readonly mode: SessionMode;
  readonly socketConnected: boolean;
  readonly writesBlocked: boolean;
  readonly queued: number;
  readonly journal: number;
  readonly dialogsPending: number;
  readonly dialogOverflow: boolean;
}

export type { SettleKind } from "./commandFlow";

export class SessionRuntime implements CommandHost {
  readonly outbox: DialogOutbox;
  readonly tab: ControlledTab;
  readonly blocked: BlockedNavigations;
  private readonly flow: CommandFlow;
  private socket: FrameSocket<SessionClientFrame> | undefined;
  private helloAcked = false;
  private closed = false;
  /** Pending `ticket_request` after the session socket dropped, and how many were sent in a row. */
  private ticketRetry: ReturnType<typeof setTimeout> | undefined;
  private ticketRequests = 0;
  /** `tab.reactions` when the current command's attribution window opened (see `settleWindow`). */
  private reactionsAtOpen: number | undefined;
  /** The current write's new document already ran the settle window's page round trip (NavigationWatch). */
  private settledInPage = false;
  /**
   * What the current command's settle round trip read in the page, and the main document's
   * version then; a write's result reports it instead of asking `chrome.tabs.get` (`writtenTab`).
   */
  private seenInPage: (PageSeen & { readonly version: number }) | undefined;
  /** The generation the lease record covers (or will, once `reserving` is done). */
  private reservedGeneration: number;
  private reserving: Promise<void> = Promise.resolve();
  /** Lease-record changes, one at a time (see `persist`). */
  private readonly persisting = new SerialChain();

  private constructor(
    private record: LeaseRecord,
    private readonly deps: RuntimeDeps,
  ) {
    const area = deps.chrome.storage.session;
    this.reservedGeneration = record.generation;
    this.flow = new CommandFlow(this, area, record.sessionId, deps.log);
    this.outbox = new DialogOutbox(area, record.sessionId);
    this.blocked = new BlockedNavigations({
      newId: () => deps.newId(),
      now: () => deps.now(),
      report: (record) => {
        if (this.helloAcked) this.send({ type: "navigation_blocked", blocked: record });
      },
    });
    this.tab = new ControlledTab(
      deps.chrome.debugger,
      record.tabId,
      record.generation,
      this.policy(),
      {
        onDialog: (params) => {
          this.onDialog(params).catch(() => {
            deps.log.warn("dialog_handling_failed");
          });
        },
        onNavigationBlocked: (url, cause) => {
          this.blocked.record("navigation", url, cause);
          deps.health.bump("navigationsBlocked");
          deps.emitHealth();
        },
        admitDocument: (url) => deps.admitDocument?.(url) ?? Promise.resolve(),
        onPopupClosed: () => {
          deps.health.bump("popupsClosed");
          deps.emitHealth();
        },
        onNewDocument: (generation, isErrorPage) => {
          this.blocked.documentCommitted(isErrorPage);
          this.recordGeneration(generation);
        },
      },
      deps.log,
    );
  }

  /**
   * Reads a session's write journal and dialog outbox from chrome.storage.session in one call. A
   * provision starts it before opening the tab (the keys depend only on the session id) and hands
   * the promise to `start`.
   */
  static readStored(deps: RuntimeDeps, sessionId: string): Promise<Record<string, unknown>> {
    return deps.chrome.storage.session.get([journalKey(sessionId), outboxKey(sessionId)]);
  }

  /**
   * Builds a runtime, loads its journal and outbox from chrome.storage.session, attaches CDP and
   * persists the lease. A restored runtime (service-worker restart) starts a fresh ref generation,
   * above the last one it recorded (see refTable.ts).
   *
   * As before, the journal and outbox are loaded before the debugger attaches, and the lease is
   * written only once the debugger is attached; the lease write then runs alongside the CDP
   * set-up calls, and is taken back if the set-up fails, so a runtime that did not start leaves
   * no lease record behind (a restore removes the record of a runtime that did not start anyway).
   * The runtime is returned, and so used, only after everything answered.
   */
  static async start(
    deps: RuntimeDeps,
    record: LeaseRecord,
    restored: boolean,
    stored: Promise<Record<string, unknown>> = SessionRuntime.readStored(deps, record.sessionId),
    /** Expressions evaluated in the tab alongside the set-up calls (the spare's unmark); their failure fails nothing. */
    alongside: readonly string[] = [],
  ): Promise<SessionRuntime> {
    const generation = restored ? record.generation + 1 : firstGeneration(record.leaseEpoch, deps.now());
    const runtime = new SessionRuntime({ ...record, generation }, deps);
    const items = await stored;
    await runtime.flow.load(items);
    await runtime.outbox.load(items);
    await runtime.tab.attach();
    const ceiling = reserveAbove(generation);
    runtime.reservedGeneration = ceiling;
    const persisting = runtime.persist((current) => ({ ...current, generation: ceiling }));
    runtime.reserving = persisting.then(
      () => undefined,
      () => undefined,
    );
    const evaluated = alongside.map((expression) =>
      runtime.tab.cdp.sendUnchecked("Runtime.evaluate", { expression }).catch(() => {
        deps.log.warn("tab_evaluate_failed");
      }),
    );
    const [setUp, persisted] = await Promise.allSettled([runtime.tab.setUp(), persisting, ...evaluated]);
    if (setUp.status === "rejected") {
      if (persisted.status === "fulfilled") {
        await deps.leases.remove(record.leaseId).catch(() => {
          deps.log.warn("lease_remove_failed");
        });
      }
      throw setUp.reason;
    }
    if (persisted.status === "rejected") throw persisted.reason;
    return runtime;
  }

  get sessionId(): string {
    return this.record.sessionId;
  }
  get leaseId(): string {
    return this.record.leaseId;
  }
  get leaseEpoch(): number {
    return this.record.leaseEpoch;
  }
  get tabId(): number {
    return this.record.tabId;
  }
  get mode(): SessionMode {
    return this.record.mode;
  }
  get isClosed(): boolean {
    return this.closed;
  }

  view(): RuntimeView {
    return {
      sessionId: this.sessionId,
      leaseEpoch: this.leaseEpoch,
      tabId: this.tabId,
      mode: this.mode,
      socketConnected: this.socket?.isOpen === true,
      writesBlocked: this.flow.writesBlocked,
      queued: this.flow.queued,
      journal: this.flow.journaled,
      dialogsPending: this.outbox.pending().length,
      dialogOverflow: this.outbox.overflowed,
    };
  }

  policy(): OriginPolicy {
    return new OriginPolicy(this.record.allowedOrigins, this.deps.localPolicy());
  }

  /** Raises the lease epoch (a newer ticket or provision for the same lease); lower ones are refused. */
  async adoptLeaseEpoch(leaseEpoch: number): Promise<boolean> {
    if (leaseEpoch < this.record.leaseEpoch) return false;
    if (leaseEpoch > this.record.leaseEpoch) await this.persist((current) => ({ ...current, leaseEpoch: Math.max(current.leaseEpoch, leaseEpoch) }));
    return true;
  }

  /** A check that throws once this runtime, its browser epoch or its lease epoch changed. */
  authority(leaseEpoch: number = this.record.leaseEpoch): AuthorityCheck {
    const browserEpoch = this.record.browserEpoch;
    return () => {
      if (this.closed || !this.deps.isCurrent(this) || this.deps.browserEpoch() !== browserEpoch || this.record.leaseEpoch !== leaseEpoch) {
        throw new StaleAuthorityError("The session's authority changed during the operation.");
      }
    };
  }

  /** The context commands run in, fenced by `check`. */
  context(deadlineMs: number, check: AuthorityCheck): CommandContext {
    const { chrome } = this.deps;
    const tabId = this.tabId;
    const policy = this.policy();
    // Only a round trip of this command's own settle window counts (see `writtenTab`).
    this.seenInPage = undefined;
    const tabInfo = async (): Promise<TabInfo> => {
      check();
      const tab = await chrome.tabs.get(tabId);
      check();
      if (tab === undefined) throw new CommandError("tab_closed", "The session's tab was closed; delete the session and create a new one.");
      const shown = this.blocked.showing;
      return {
        tabId,
        url: tab.url.slice(0, MAX_TAB_URL),
        title: tab.title.slice(0, MAX_TAB_TITLE),
        active: tab.active,
        ...(shown === undefined ? {} : { blockedNavigation: shown }),
      };
    };
    /**
     * The tab as a write's result reports it. After a settle round trip the page already said
     * where it is and what its title is; that answer stands in for a `chrome.tabs.get` (0.3-2.7 ms
     * here, the most right after a load) only when it cannot mislead: its URL is the one the
     * page's own CDP events reported for the main document (page script cannot fake those, nor
     * `location.href`), no document committed and no same-document navigation happened since,
     * the tab shows no error page, the session allows that URL, and the title is not empty
     * (Chrome then shows a title of its own). Anything else asks Chrome.
     */
    const writtenTab = async (): Promise<Pick<TabInfo, "url" | "title">> => {
      check();
      const seen = this.seenInPage;
      const main = this.tab.mainDocument;
      if (
        seen !== undefined &&
        seen.version === main.version &&
        !main.errorPage &&
        this.blocked.showing === undefined &&
        seen.href === main.url &&
        seen.title.trim() !== "" &&
        policy.allowsUrl(seen.href)
      ) {
        return { url: seen.href.slice(0, MAX_TAB_URL), title: seen.title.slice(0, MAX_TAB_TITLE) };
      }
      const { url, title } = await tabInfo();
      return { url, title };
    };
    return {
      cdp: this.tab.cdp.caller(check),
      tabId,
      refs: this.tab.refs,
      snapshots: this.tab.snapshots,
      policy,
      capabilities: this.deps.capabilities,
      deadlineMs,
      now: () => this.deps.now(),
      sleep: (ms) =>
        new Promise((resolve) => {
          setTimeout(resolve, ms);
        }),
      tab: tabInfo,
      writtenTab,
      activateTab: async () => {
        check();
        await chrome.tabs.activate(tabId);
        check();
      },
      watchNavigation: () =>
        new NavigationWatch(this.tab.cdp, {
          onPageSettled: (seen) => {
            this.settledInPage = true;
            this.seenInPage = seen === undefined ? undefined : { ...seen, version: this.tab.mainDocument.version };
          },
        }),
      blockedPage: () => this.blocked.showing,
      objects: new Map(),
    };
  }

  /** A popup of this tab was closed: record it for the caller. */
  popupBlocked(url: string): void {
    this.tab.noteReaction();
    this.blocked.record("popup", url, "popup");
  }

  /**
   * The settle window after a write acted: what the page does in response (a navigation it
   * starts, a redirect, a popup) is attributed to the command. Unless `kind` is `none`, the page's
   * task queue first runs what was scheduled with no delay; an `activation` then waits
   * `BLOCK_SETTLE_MS` for the browser's reports of what its handlers did, unless the page gave no
   * sign of a reaction since the command's window opened (`ControlledTab.reactions`: no window
   * opened, no navigation requested or started, no target attached, and no frame of another
   * process whose signs this tab cannot see), in which case there is nothing to wait for; every
   * write then waits while a main-frame navigation is still undecided, until the event that
   * decides it. Never past `BLOCK_SETTLE_MAX_MS` or the command's deadline.
   *
   * A `navigate` whose new document already made the round trip after its `load`
   * (NavigationWatch.settled) is not made to make it again.
   */
  async settleWindow(deadlineMs: number, kind: SettleKind): Promise<void> {
    const started = this.deps.now();
    const until = Math.min(started + BLOCK_SETTLE_MAX_MS, deadlineMs);
    const sleep = (ms: number): Promise<void> =>
      new Promise((resolve) => {
        setTimeout(resolve, Math.max(0, ms));
      });
    const settleMs = this.deps.settleMs ?? BLOCK_SETTLE_MS;
    if (kind !== "none" && settleMs > 0) {
      if (!this.settledInPage) {
        const seen = await Promise.race([this.pageTaskRoundTrip(), sleep(Math.min(BLOCK_SETTLE_PAGE_MS, until - started))]);
        this.seenInPage = seen === undefined ? undefined : { ...seen, version: this.tab.mainDocument.version };
      }
      if (kind === "activation" && this.pageReacted()) {
        await sleep(Math.min(settleMs, until - this.deps.now()));
        // The page's handlers ran on meanwhile (a title they set late): ask Chrome afterwards.
        this.seenInPage = undefined;
      }
    }
    if (!this.closed) await this.tab.navigationDecided(until - this.deps.now());
  }

  /** Whether the page gave a sign of opening a window or navigating since the window opened. */
  private pageReacted(): boolean {
    return this.tab.hasOutOfProcessFrames || this.reactionsAtOpen === undefined || this.tab.reactions !== this.reactionsAtOpen;
  }

  /**
   * Resolves once the page ran a zero-delay task queued now, with what the page showed then; a
   * page that navigated or hangs ends it too, with nothing.
   */
  private async pageTaskRoundTrip(): Promise<PageSeen | undefined> {
    try {
      const answer = await this.tab.cdp.sendUnchecked("Runtime.evaluate", { expression: PAGE_TASK_EXPRESSION, awaitPromise: true, returnByValue: true });
      return pageSeenOf((answer as { result?: { value?: unknown } } | undefined)?.result?.value);
    } catch {
      // A navigation destroyed the context, or the tab went away: the reaction is under way or over.
      return undefined;
    }
  }

  /** Runs `task` with stops attributed to `commandId`; returns its value and those stops. */
  async attributing<T>(commandId: string, task: () => Promise<T>): Promise<{ value: T; blocked: BlockedNavigation[] }> {
    this.blocked.open(commandId);
    this.reactionsAtOpen = this.tab.reactions;
    this.settledInPage = false;
    try {
      const value = await task();
      return { value, blocked: this.blocked.close() };
    } finally {
      this.blocked.close();
      this.reactionsAtOpen = undefined;
      this.settledInPage = false;
    }
  }

  now(): number {
    return this.deps.now();
  }

  /**
   * Refs of a new document's generation wait until the lease record covers it (see refTable.ts).
   * The record holds a ceiling `GENERATION_RESERVE` generations ahead, so only the document that
   * passes it costs a lease write (while the page loads, when storage answers slowest); the others
   * are covered by the write already made, once it is done.
   */
  private recordGeneration(generation: number): void {
    const recorded = (): void => {
      this.tab.refs.recorded(generation);
    };
    if (generation <= this.reservedGeneration) {
      this.reserving.then(recorded, recorded);
      return;
    }
    const ceiling = reserveAbove(generation);
    this.reservedGeneration = ceiling;
    this.reserving = this.persist((current) => ({ ...current, generation: Math.max(current.generation, ceiling) })).catch(() => {
      this.deps.log.warn("lease_persist_failed");
    });
    this.reserving.then(recorded, recorded);
  }

  /** Opens the session socket with a ticket from the device socket. */
  connect(ticket: DeviceServerSessionTicket): void {
    const serviceOrigin = this.deps.serviceOrigin();
    if (this.closed || serviceOrigin === undefined || !socketUrlMatchesService(ticket.socketUrl, serviceOrigin)) {
      this.deps.log.warn("session_ticket_refused", { reason: this.closed ? "closed" : "socket_url_not_on_service_origin" });
      return;
    }
    this.cancelTicketRetry();
    this.socket?.close(1000, "replaced");
    this.helloAcked = false;
    const socket: FrameSocket<SessionClientFrame> = new FrameSocket(this.deps.socketFactory(withTicket(ticket.socketUrl, ticket.ticket)), {
      onOpen: () => {
        this.sendHello().catch(() => {
          this.deps.log.warn("session_hello_failed");
        });
      },
      onFrame: (raw) => {
        if (this.socket === socket) this.onFrame(raw);
      },
      onClose: (code) => {
        if (this.socket !== socket) return;
        this.socket = undefined;
        this.helloAcked = false;
        this.deps.log.info("session_socket_closed", { code });
        // A revoked device gets no new tickets; its device socket is closed too.
        // After CLOSE_NOT_AUTHORITATIVE the session's authority moved (a new lease epoch, closing,
        // terminal) and the backend sends a provision or close frame itself; after CLOSE_REVOKED
        // the device is gone. A fresh ticket would only be refused in both cases.
        if (code !== CLOSE_NOT_AUTHORITATIVE && code !== CLOSE_REVOKED) this.scheduleTicketRequest();
      },
    });
    this.socket = socket;
  }

  /**
   * Only the session socket dropped: ask for a fresh single-use ticket on the device socket, after
   * a backoff with jitter, a bounded number of times in a row. When the device socket is down too,
   * nothing is sent: its reconnect and `hello` make the backend send a ticket for every live lease.
   */
  private scheduleTicketRequest(): void {
    if (this.closed || this.ticketRetry !== undefined || this.ticketRequests >= SESSION_TICKET_MAX_REQUESTS) return;
    const delay = reconnectDelayMs(this.ticketRequests, this.deps.random === undefined ? {} : { random: this.deps.random });
    this.ticketRetry = setTimeout(() => {
      this.ticketRetry = undefined;
      if (this.closed || this.socket !== undefined || !this.deps.isCurrent(this)) return;
      const sent = this.deps.sendDevice({ type: "ticket_request", sessionId: this.sessionId, leaseId: this.leaseId, leaseEpoch: this.leaseEpoch });
      if (sent) this.ticketRequests += 1;
    }, delay);
  }

  private cancelTicketRetry(): void {
    if (this.ticketRetry !== undefined) clearTimeout(this.ticketRetry);
    this.ticketRetry = undefined;
  }

  /** Sends a frame on the session socket; false when it is not open. */
  send(frame: SessionClientFrame): boolean {
    return this.socket?.send(frame) ?? false;
  }

  private async sendHello(): Promise<void> {
    const tab = await this.context(this.deps.now() + HELLO_TAB_DEADLINE_MS, this.authority()).tab();
    // Taken last, right before the frame leaves: what it reports `prepared` never acts from here
    // on (CommandFlow.helloJournal).
    const journal = await this.flow.helloJournal();
    this.send({
      type: "hello",
      sessionId: this.sessionId,
      leaseId: this.leaseId,
      leaseEpoch: this.leaseEpoch,
      browserEpoch: this.record.browserEpoch,
      protocolVersion: SESSION_PROTOCOL_VERSION,
      capabilities: [...this.deps.capabilities],
      tab,
      journal,
    });
  }

  private onFrame(raw: unknown): void {
    const decoded = decodeSessionServerFrame(raw);
    if (!decoded.ok) {
      this.send({ type: "error", code: "invalid_frame", message: decoded.message });
      return;
    }
    this.dispatch(decoded.value).catch((error: unknown) => {
      this.deps.log.warn("session_frame_failed", { kind: error instanceof Error ? error.name : "unknown" });
    });
  }

  private async dispatch(frame: SessionServerFrame): Promise<void> {
    switch (frame.type) {
      case "hello_ack":
        await this.onHelloAck(frame);
        return;
      case "read":
        this.flow.read(frame);
        return;
      case "write_prepare":
        await this.flow.prepare(frame);
        return;
      case "write_grant":
        await this.flow.grant(frame);
        return;
      case "result_ack":
        await this.flow.acknowledge(frame.commandId);
        return;
      case "dialog_ack":
        await this.outbox.remove(frame.dialogId);
        return;
      case "cancel":
        await this.flow.cancel(frame.commandId);
        return;
      case "error":
        this.deps.log.warn("session_server_error", { code: frame.code });
        return;
      default: {
        const unreachable: never = frame;
        throw new Error(`unhandled session frame ${String(unreachable)}`);
      }
    }
  }

  /** Applies the backend's verdict on the journal, then replays results and pending dialogs. */
  private async onHelloAck(frame: SessionServerHelloAck): Promise<void> {
    if (frame.leaseEpoch !== this.leaseEpoch) {
      this.deps.log.warn("hello_ack_epoch_mismatch");
      return;
    }
    await this.flow.applyVerdict(frame);
    this.helloAcked = true;
    this.ticketRequests = 0;
    this.flow.replayCompleted();
    for (const dialog of this.outbox.pending()) this.send({ type: "dialog", dialog });
  }

  get isReady(): boolean {
    return this.helloAcked && this.socket?.isOpen === true;
  }

  /** Persists each dialog, then answers it, then sends it; on overflow answers and only counts. */
  private async onDialog(params: DialogOpeningParams): Promise<void> {
    const accepted = params.type === "alert" || params.type === "beforeunload";
    const record: DialogRecord = {
      dialogId: this.deps.newId(),
      dialogType: params.type,
      message: params.message.slice(0, MAX_DIALOG_TEXT),
      ...(params.defaultPrompt === undefined || params.defaultPrompt === "" ? {} : { defaultPrompt: params.defaultPrompt.slice(0, MAX_DIALOG_TEXT) }),
      accepted,
      openedAt: new Date(this.deps.now()).toISOString(),
      delivery: "delivered",
    };
    const stored = await this.outbox.add(record);
    try {
      // Answered whatever happened to persistence, so the page is never left blocked.
      await this.tab.cdp.sendUnchecked("Page.handleJavaScriptDialog", { accept: accepted });
    } catch {
      this.deps.log.warn("dialog_answer_failed");
    }
    if (stored === "persisted") {
      if (this.helloAcked) this.send({ type: "dialog", dialog: record });
      return;
    }
    this.deps.health.bump("dialogOverflow");
    this.deps.emitHealth();
  }

  /**
   * Persists a change to the lease record; keeps memory and storage in step. Changes run one after
   * another, each applied to the record the previous one left, so a new document's generation and
   * a newer lease epoch arriving together cannot undo each other.
   */
  persist(change: (current: LeaseRecord) => LeaseRecord): Promise<void> {
    return this.persisting.run(async () => {
      const next = change(this.record);
      await this.deps.leases.put(next);
      this.record = next;
    });
  }

  /**
   * Ends the runtime: closes the socket, detaches CDP, forgets its storage. `closeTab` is true only
   * for an extension-owned (unattended) tab; an attended tab is never closed.
   */
  async close(closeTab: boolean): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.cancelTicketRetry();
    this.socket?.close(1000, "lease released");
    this.socket = undefined;
    if (closeTab && this.mode === "unattended") {
      // Closed while CDP is still attached: detaching first resumes a main-frame request the
      // origin guard holds paused (a redirect hop, a link clicked just before the close), which
      // would then reach an origin the session does not allow.
      try {
        await this.deps.chrome.tabs.remove(this.tabId);
      } catch {
        // Already gone.
      }
    }
    await this.tab.detach();
    await this.flow.clear();
    await this.outbox.clear();
    await this.deps.leases.remove(this.leaseId);
  }

  /** Chrome dropped the debugger (tab closed, person clicked Cancel on the infobar). */
  markDetached(): void {
    this.tab.cdp.markDetached();
  }
}
