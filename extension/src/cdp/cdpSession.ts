/**
 * The chrome.debugger attachment of one controlled tab. Events arrive already routed by tab id
 * (SessionManager owns the single chrome.debugger.onEvent listener). Every command sent through
 * a `CdpCaller` rechecks its authority before and after the await, so a command whose lease,
 * browser epoch or runtime changed meanwhile stops instead of acting for a stale owner.
 */
import type { DebuggerApi } from "../chrome/facade";

/** Throws StaleAuthorityError when the operation's authority is gone. */
export type AuthorityCheck = () => void;

/** Sends CDP commands on behalf of one operation. */
export interface CdpCaller {
  send<T = unknown>(method: string, params?: object, sessionId?: string): Promise<T>;
}

export type CdpEventListener = (method: string, params: unknown, sessionId: string | undefined) => void;

const ALREADY_ATTACHED = /already attached/i;

export class CdpSession {
  private readonly listeners = new Set<CdpEventListener>();
  private attached = false;

  constructor(
    private readonly api: DebuggerApi,
    readonly tabId: number,
  ) {}

  get isAttached(): boolean {
    return this.attached;
  }

  /** Attaches, taking over an attachment this extension left behind before a worker restart. */
  async attach(): Promise<void> {
    try {
      await this.api.attach(this.tabId);
    } catch (error) {
      if (!(error instanceof Error) || !ALREADY_ATTACHED.test(error.message)) throw error;
      await this.detach();
      await this.api.attach(this.tabId);
    }
    this.attached = true;
  }

  async detach(): Promise<void> {
    this.attached = false;
    try {
      await this.api.detach(this.tabId);
    } catch {
      // Already detached (tab closed, or Chrome dropped the session): nothing left to release.
    }
  }

  /** Chrome detached the debugger on its own. */
  markDetached(): void {
    this.attached = false;
  }

  /** A caller whose every command is fenced by `check`. */
  caller(check: AuthorityCheck): CdpCaller {
    return {
      send: async <T>(method: string, params?: object, sessionId?: string): Promise<T> => {
        check();
        const result = await this.sendUnchecked(method, params, sessionId);
        check();
        return result as T;
      },
    };
  }

  /**
   * Sends without an authority check. Only for answers the page is blocked on (dialogs, paused
   * requests, paused targets), which must be given even while the runtime is being torn down.
   */
  sendUnchecked(method: string, params?: object, sessionId?: string): Promise<unknown> {
    const target = sessionId === undefined ? { tabId: this.tabId } : { tabId: this.tabId, sessionId };
    return this.api.sendCommand(target, method, params);
  }

  on(listener: CdpEventListener): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  dispatch(method: string, params: unknown, sessionId: string | undefined): void {
    for (const listener of [...this.listeners]) listener(method, params, sessionId);
  }
}
