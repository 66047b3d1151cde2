/**
 * ProfileClient: enrollment, the device socket, heartbeats and reconnects.
 *
 * Connection: POST /v1/device/connect-ticket over HTTPS with the credential only in the
 * Authorization header → open the device socket with the single-use ticket only → `hello`
 * (protocol versions, capabilities, browser epoch, local origin policy, capacity, leases) →
 * `welcome` → heartbeats every 22 s as application frames (they also keep the service worker
 * alive). Any failure reconnects with exponential backoff and jitter.
 */
import type { ChromeFacade } from "../chrome/facade";
import { type EnrollmentConfig, type LoadedEnrollment, ENROLLMENT_KEY, loadEnrollment } from "../config/enrollment";
import { CLOSE_HEARTBEAT_TIMEOUT, CLOSE_REVOKED } from "@understudy/protocol";
import { HEARTBEAT_ACK_TIMEOUT_MS, HEARTBEAT_INTERVAL_MS, KEEPALIVE_ALARM_NAME, KEEPALIVE_ALARM_PERIOD_MINUTES } from "../constants";
import type { Capability, ConnectTicket, DeviceClientFrame, DeviceServerFrame, DeviceServerWelcome, LocalOriginPolicy } from "@understudy/protocol";
import type { RedactingLogger } from "../log";
import { FrameSocket, type SocketFactory } from "../net/socket";
import { socketUrlMatchesService, withTicket } from "../net/urls";
import { decodeDeviceServerFrame } from "../protocol/decode";
import { AttachRequests } from "../sessions/attendedAttach";
import { LeaseStore } from "../sessions/leaseStore";
import { SessionManager } from "../sessions/sessionManager";
import { reconnectDelayMs } from "./backoff";
import { loadBrowserEpoch } from "./browserEpoch";
import { HealthCounters } from "./health";
import { scheduleStartupTabChecks } from "./startupTabs";

/** What this extension implements; `safe_write_v2` lets the backend send writes. */
export const CAPABILITIES: readonly Capability[] = [
  "safe_write_v2",
  "dialogs_v1",
  "attended_v1",
  "unattended_v1",
  "fetch_origin_guard_v1",
  "popup_guard_v1",
  "snapshot_compact_v1",
  "wait_for_element_state_v1",
  "drag_v1",
  "select_text_v1",
];

export type ConnectionState = "starting" | "unconfigured" | "disabled" | "connecting" | "online" | "backoff" | "unauthorized";

export interface ProfileDeps {
  readonly chrome: ChromeFacade;
  readonly socketFactory: SocketFactory;
  readonly fetch: (url: string, init: RequestInit) => Promise<Response>;
  readonly log: RedactingLogger;
  readonly random?: () => number;
  readonly newId?: () => string;
  readonly now?: () => number;
  /** The write settle window (BLOCK_SETTLE_MS when absent); unit tests shorten it. */
  readonly settleMs?: number;
  /** Whether to keep a spare window ready for the next session (see spareWindow.ts); true when absent. */
  readonly spareWindow?: boolean;
  /** How long after a provision the next spare opens (SPARE_REOPEN_DELAY_MS when absent). */
  readonly spareReopenDelayMs?: number;
}

export const CONNECT_TICKET_PATH = "/v1/device/connect-ticket";

export class ProfileClient {
  readonly manager: SessionManager;
  readonly attachRequests: AttachRequests;
  readonly health = new HealthCounters();
  private readonly newId: () => string;
  private readonly now: () => number;
  private loaded: LoadedEnrollment = { source: "none" };
  private epoch: string | undefined;
  private epochIsNew = false;
  private recoveryReported = false;
  private state: ConnectionState = "starting";
  private lastError: string | undefined;
  private socket: FrameSocket<DeviceClientFrame> | undefined;
  private welcome: DeviceServerWelcome | undefined;
  private attempt = 0;
  private connectionSerial = 0;
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  private heartbeatTimer: ReturnType<typeof setInterval> | undefined;
  private heartbeatSeq = 0;
  private lastAckAt = 0;
  private healthQueued = false;
  private started: Promise<void> | undefined;
  /** The worker's one lease store: the runtimes write through it, and start-up reads it. */
  private readonly leases: LeaseStore;

  constructor(private readonly deps: ProfileDeps) {
    this.newId = deps.newId ?? (() => crypto.randomUUID());
    this.now = deps.now ?? (() => Date.now());
    const { chrome } = deps;
    this.leases = new LeaseStore(chrome.storage.session);
    this.manager = new SessionManager({
      chrome,
      socketFactory: deps.socketFactory,
      log: deps.log,
      health: this.health,
      leases: this.leases,
      capabilities: CAPABILITIES,
      emitHealth: () => {
        this.emitHealth();
      },
      browserEpoch: () => this.epoch ?? "",
      localPolicy: () => this.localPolicy(),
      serviceOrigin: () => this.loaded.config?.serviceOrigin,
      isCurrent: (runtime) => this.manager.isCurrent(runtime),
      newId: this.newId,
      now: this.now,
      sendDevice: (frame) => this.sendDevice(frame),
      enabled: () => this.loaded.config?.enabled === true,
      // Only while the device can be given sessions: never once its credential was refused.
      spareWanted: () => deps.spareWindow !== false && this.state !== "unauthorized",
      ...(deps.random === undefined ? {} : { random: deps.random }),
      ...(deps.settleMs === undefined ? {} : { settleMs: deps.settleMs }),
      ...(deps.spareReopenDelayMs === undefined ? {} : { spareReopenDelayMs: deps.spareReopenDelayMs }),
    });
    this.attachRequests = new AttachRequests({
      chrome,
      manager: this.manager,
      log: deps.log,
      sendDevice: (frame) => this.sendDevice(frame),
      newId: this.newId,
      browserEpoch: () => this.epoch ?? "",
      localPolicy: () => this.localPolicy(),
      enabled: () => this.loaded.config?.enabled === true,
    });
    chrome.alarms.onAlarm((name) => {
      if (name === KEEPALIVE_ALARM_NAME) this.wake();
    });
    chrome.storage.onChanged((area, keys) => {
      if ((area === "local" && keys.includes(ENROLLMENT_KEY)) || area === "managed") {
        this.reloadConfig().catch(() => {
          deps.log.warn("config_reload_failed");
        });
      }
    });
  }

  /** Starts once per service-worker life: epoch, configuration, restored runtimes, connection. */
  start(): Promise<void> {
    this.started ??= this.startOnce();
    return this.started;
  }

  private async startOnce(): Promise<void> {
    const { chrome, log } = this.deps;
    const epoch = await loadBrowserEpoch(chrome.storage.session, this.newId);
    this.epoch = epoch.epoch;
    this.epochIsNew = epoch.isNew;
    log.info("browser_epoch", { fresh: epoch.isNew });
    // A new epoch is a browser start: resume the person's tabs Chromium left stalled (see
    // startupTabs.ts); controlled tabs are the runtimes' business.
    if (epoch.isNew) scheduleStartupTabChecks(chrome.tabs, (tabId) => this.manager.isControlledTab(tabId), log);
    await this.applyConfig(await loadEnrollment(chrome.storage));
    // A disabled device controls nothing; its runtimes were released when it was disabled.
    if (this.loaded.config?.enabled === true) await this.manager.restore(await this.leases.load());
    await chrome.alarms.create(KEEPALIVE_ALARM_NAME, KEEPALIVE_ALARM_PERIOD_MINUTES);
    this.connectIfIdle();
  }

  get browserEpoch(): string | undefined {
    return this.epoch;
  }

  get connectionState(): ConnectionState {
    return this.state;
  }

  get lastErrorCode(): string | undefined {
    return this.lastError;
  }

  get enrollment(): LoadedEnrollment {
    return this.loaded;
  }

  get connectionEpoch(): number | undefined {
    return this.welcome?.connectionEpoch;
  }

  /** Re-reads the configuration (options saved, policy changed) and reconnects. */
  async reloadConfig(): Promise<void> {
    await this.start();
    const next = await loadEnrollment(this.deps.chrome.storage);
    // Our own save reaches us twice (the panel request and storage.onChanged): reconnect once.
    if (JSON.stringify(next) === JSON.stringify(this.loaded)) return;
    await this.applyConfig(next);
    this.disconnect();
    this.attempt = 0;
    this.connectIfIdle();
  }

  /** The alarm fired (or the worker woke): make sure a connection is on its way. */
  wake(): void {
    this.start()
      .then(() => {
        this.connectIfIdle();
      })
      .catch(() => {
        this.deps.log.warn("wake_failed");
      });
  }

  private async applyConfig(loaded: LoadedEnrollment): Promise<void> {
    const previous = this.loaded.config;
    if (previous !== undefined) this.deps.log.removeSecret(previous.credential);
    this.loaded = loaded;
    if (loaded.config !== undefined) this.deps.log.addSecret(loaded.config.credential);
    if (loaded.config?.enabled !== true) {
      this.disconnect();
      await this.manager.releaseAll();
    }
  }

  private localPolicy(): LocalOriginPolicy {
    return this.loaded.config?.localOriginPolicy ?? { mode: "allowlist", origins: [] };
  }

  private connectIfIdle(): void {
    const config = this.loaded.config;
    if (config === undefined) {
      this.state = "unconfigured";
      return;
    }
    if (!config.enabled) {
      this.state = "disabled";
      return;
    }
    if (this.socket !== undefined || this.reconnectTimer !== undefined || this.state === "connecting") return;
    this.state = "connecting";
    const serial = ++this.connectionSerial;
    this.connect(config, serial).catch(() => {
      if (serial === this.connectionSerial) this.fail("connect_failed");
    });
  }

  private async connect(config: EnrollmentConfig, serial: number): Promise<void> {
    const ticket = await this.fetchTicket(config, serial);
    if (ticket === undefined || serial !== this.connectionSerial) return;
    if (!socketUrlMatchesService(ticket.socketUrl, config.serviceOrigin)) {
      this.fail("socket_url_not_on_service_origin");
      return;
    }
    this.deps.log.addSecret(ticket.ticket);
    const socket: FrameSocket<DeviceClientFrame> = new FrameSocket(this.deps.socketFactory(withTicket(ticket.socketUrl, ticket.ticket)), {
      onOpen: () => {
        if (this.socket === socket) this.sendHello();
      },
      onFrame: (raw) => {
        if (this.socket === socket) this.onFrame(raw);
      },
      onClose: (code) => {
        this.deps.log.removeSecret(ticket.ticket);
        if (this.socket !== socket) return;
        this.socket = undefined;
        this.deps.log.info("device_socket_closed", { code });
        if (code === CLOSE_REVOKED) {
          this.revoked();
          return;
        }
        this.fail("socket_closed");
      },
    });
    this.socket = socket;
  }

  private async fetchTicket(config: EnrollmentConfig, serial: number): Promise<ConnectTicket | undefined> {
    const response = await this.deps.fetch(`${config.serviceOrigin}${CONNECT_TICKET_PATH}`, {
      method: "POST",
      headers: { Authorization: `Bearer ${config.credential}`, "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ browserEpoch: this.epoch }),
      credentials: "omit",
      cache: "no-store",
      // A redirect would carry the request elsewhere; the credential goes to the service origin only.
      redirect: "error",
      referrerPolicy: "no-referrer",
    });
    if (serial !== this.connectionSerial) return undefined;
    if (response.status === 401 || response.status === 403) {
      this.fail("unauthorized");
      return undefined;
    }
    if (response.status === 429) {
      const retryAfterSeconds = Number(response.headers.get("Retry-After"));
      this.fail("rate_limited", Number.isFinite(retryAfterSeconds) && retryAfterSeconds > 0 ? retryAfterSeconds * 1000 : undefined);
      return undefined;
    }
    if (!response.ok) {
      this.fail(`ticket_http_${response.status}`);
      return undefined;
    }
    const body = (await response.json()) as Partial<ConnectTicket>;
    if (typeof body.ticket !== "string" || typeof body.socketUrl !== "string") {
      this.fail("ticket_malformed");
      return undefined;
    }
    return { ticket: body.ticket, socketUrl: body.socketUrl, expiresAt: String(body.expiresAt) };
  }

  private sendHello(): void {
    const config = this.loaded.config;
    if (config === undefined || this.epoch === undefined) return;
    this.sendDevice({
      type: "hello",
      protocolVersions: [1, 2],
      capabilities: [...CAPABILITIES],
      browserEpoch: this.epoch,
      extensionVersion: this.deps.chrome.runtime.extensionVersion,
      localOriginPolicy: config.localOriginPolicy,
      capacity: { total: 2, free: this.manager.freeCapacity() },
      leases: this.manager.leasesForHello(),
      popupContainment: this.manager.popupContainment(),
    });
  }

  /** Sends a frame on the device socket; false when it is not open. */
  sendDevice(frame: DeviceClientFrame): boolean {
    return this.socket?.send(frame) ?? false;
  }

  private onFrame(raw: unknown): void {
    const decoded = decodeDeviceServerFrame(raw);
    if (!decoded.ok) {
      this.sendDevice({ type: "error", code: "invalid_frame", message: decoded.message });
      return;
    }
    this.dispatch(decoded.value).catch(() => {
      this.deps.log.warn("device_frame_failed", { type: decoded.value.type });
    });
  }

  private async dispatch(frame: DeviceServerFrame): Promise<void> {
    switch (frame.type) {
      case "welcome":
        this.onWelcome(frame);
        return;
      case "heartbeat_ack":
        this.lastAckAt = this.now();
        return;
      case "provision":
        this.sendDevice(await this.manager.provision(frame));
        // Once this session had time to connect (see SPARE_REOPEN_DELAY_MS).
        this.manager.spare.ensureSoon();
        return;
      case "close":
        this.sendDevice(await this.manager.close(frame));
        this.manager.spare.ensureSoon();
        return;
      case "session_ticket":
        await this.manager.sessionTicket(frame);
        return;
      case "attach_result":
        this.attachRequests.onResult(frame);
        return;
      case "error":
        this.deps.log.warn("device_server_error", { code: frame.code });
        return;
      default: {
        const unreachable: never = frame;
        throw new Error(`unhandled device frame ${String(unreachable)}`);
      }
    }
  }

  private onWelcome(frame: DeviceServerWelcome): void {
    this.welcome = frame;
    this.state = "online";
    this.lastError = undefined;
    this.attempt = 0;
    this.lastAckAt = this.now();
    this.deps.log.info("device_online", { connectionEpoch: frame.connectionEpoch });
    this.startHeartbeats();
    // Online: the next provision may come any moment, so its window is opened now.
    this.manager.spare.ensure();
    if (this.epochIsNew && !this.recoveryReported && this.epoch !== undefined) {
      // A fresh epoch holds none of the previous epoch's leases (chrome.storage.session was cleared
      // with it), so the report is empty and the backend re-provisions live leases with fresh
      // about:blank tabs. Prior URLs are never restored.
      this.recoveryReported = this.sendDevice({ type: "recovery_report", browserEpoch: this.epoch, leases: [] });
    }
    this.emitHealth();
  }

  private startHeartbeats(): void {
    this.stopHeartbeats();
    this.heartbeatTimer = setInterval(() => {
      if (this.now() - this.lastAckAt > HEARTBEAT_ACK_TIMEOUT_MS) {
        this.deps.log.warn("heartbeat_ack_timeout");
        this.socket?.close(CLOSE_HEARTBEAT_TIMEOUT, "heartbeat timeout");
        this.socket = undefined;
        this.fail("heartbeat_timeout");
        return;
      }
      this.sendDevice({ type: "heartbeat", seq: this.heartbeatSeq, freeCapacity: this.manager.freeCapacity() });
      this.heartbeatSeq += 1;
    }, HEARTBEAT_INTERVAL_MS);
  }

  private stopHeartbeats(): void {
    if (this.heartbeatTimer !== undefined) clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = undefined;
  }

  /** Coalesces health reports into one frame per turn. */
  emitHealth(): void {
    if (this.healthQueued) return;
    this.healthQueued = true;
    queueMicrotask(() => {
      this.healthQueued = false;
      if (this.state !== "online") return;
      const frame = this.health.takeFrame();
      if (frame !== undefined && !this.sendDevice(frame)) this.health.restore(frame);
    });
  }

  private fail(code: string, delayOverrideMs?: number): void {
    this.stopHeartbeats();
    this.welcome = undefined;
    this.lastError = code;
    if (this.socket !== undefined) {
      this.socket.close(1000, "reconnecting");
      this.socket = undefined;
    }
    const config = this.loaded.config;
    if (config?.enabled !== true) return;
    this.state = code === "unauthorized" ? "unauthorized" : "backoff";
    if (code === "unauthorized") this.closeSpare();
    const delay = delayOverrideMs ?? reconnectDelayMs(this.attempt, this.deps.random === undefined ? {} : { random: this.deps.random });
    this.attempt += 1;
    this.deps.log.info("device_reconnect_scheduled", { reason: code, delayMs: delay });
    if (this.reconnectTimer !== undefined) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      this.state = "backoff";
      this.connectIfIdle();
    }, delay);
  }

  /**
   * The service revoked this device's credential: another ticket request would only be refused,
   * so nothing reconnects until the enrollment changes (an operator enrolls the device again).
   */
  private revoked(): void {
    this.stopHeartbeats();
    this.welcome = undefined;
    this.lastError = "revoked";
    this.state = "unauthorized";
    if (this.reconnectTimer !== undefined) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = undefined;
    this.deps.log.warn("device_revoked");
    this.closeSpare();
  }

  /** A device that can be given no session keeps no spare window open. */
  private closeSpare(): void {
    this.manager.spare.close().catch(() => {
      this.deps.log.warn("spare_window_close_failed");
    });
  }

  private disconnect(): void {
    this.connectionSerial += 1;
    this.stopHeartbeats();
    if (this.reconnectTimer !== undefined) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = undefined;
    this.socket?.close(1000, "configuration changed");
    this.socket = undefined;
    this.welcome = undefined;
    if (this.state !== "starting") this.state = "backoff";
  }
}
