/**
 * A minimal WebSocket facade and a JSON frame socket on top of it. Tests pass a fake factory;
 * the service worker passes `(url) => new WebSocket(url)`.
 */

/** The subset of the WebSocket API the extension uses. */
export interface SocketLike {
  readonly readyState: number;
  onopen: ((event: Event) => void) | null;
  onmessage: ((event: MessageEvent) => void) | null;
  onclose: ((event: CloseEvent) => void) | null;
  onerror: ((event: Event) => void) | null;
  send(data: string): void;
  close(code?: number, reason?: string): void;
}

export type SocketFactory = (url: string) => SocketLike;

/** WebSocket.OPEN; repeated here because the fake in tests has no WebSocket global. */
export const SOCKET_OPEN = 1;

/** Callbacks of one frame socket connection. */
export interface FrameSocketHandlers {
  onOpen(): void;
  onFrame(frame: unknown): void;
  onClose(code: number): void;
}

/**
 * One connection that sends typed frames as JSON and hands parsed frames to its handlers.
 * `Out` is the union of frames this side may send (a generated type), so a misspelt frame does
 * not compile.
 */
export class FrameSocket<Out> {
  private closed = false;

  constructor(
    private readonly socket: SocketLike,
    handlers: FrameSocketHandlers,
  ) {
    socket.onopen = () => {
      handlers.onOpen();
    };
    socket.onmessage = (event) => {
      if (typeof event.data !== "string") return;
      let parsed: unknown;
      try {
        parsed = JSON.parse(event.data);
      } catch {
        parsed = undefined;
      }
      handlers.onFrame(parsed);
    };
    socket.onclose = (event) => {
      if (this.closed) return;
      this.closed = true;
      handlers.onClose(event.code);
    };
    socket.onerror = () => {
      // An error is always followed by close; the close handler does the work.
    };
  }

  get isOpen(): boolean {
    return !this.closed && this.socket.readyState === SOCKET_OPEN;
  }

  /** Sends one frame; returns false when the socket is not open (the caller keeps the data). */
  send(frame: Out): boolean {
    if (!this.isOpen) return false;
    this.socket.send(JSON.stringify(frame));
    return true;
  }

  /** Closes without calling `onClose` (the caller chose to close). */
  close(code = 1000, reason = ""): void {
    if (this.closed) return;
    this.closed = true;
    this.socket.close(code, reason);
  }
}
