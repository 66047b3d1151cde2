/** A fake WebSocket: tests open it, push server frames into it and read what the extension sent. */
import type { SocketFactory, SocketLike } from "../../src/net/socket";

export class FakeSocket implements SocketLike {
  readyState = 0;
  onopen: ((event: Event) => void) | null = null;
  onmessage: ((event: MessageEvent) => void) | null = null;
  onclose: ((event: CloseEvent) => void) | null = null;
  onerror: ((event: Event) => void) | null = null;
  readonly sent: Record<string, unknown>[] = [];
  closedByClient: number | undefined;

  constructor(readonly url: string) {}

  /** The server accepted the upgrade. */
  open(): void {
    this.readyState = 1;
    this.onopen?.(new Event("open"));
  }

  /** The server sent a frame. */
  receive(frame: unknown): void {
    this.onmessage?.({ data: JSON.stringify(frame) } as MessageEvent);
  }

  /** The server (or the network) closed the socket. */
  drop(code = 1006): void {
    this.readyState = 3;
    this.onclose?.({ code, reason: "" } as CloseEvent);
  }

  send(data: string): void {
    if (this.readyState !== 1) throw new Error("send on a socket that is not open");
    this.sent.push(JSON.parse(data) as Record<string, unknown>);
  }

  close(code = 1000): void {
    this.closedByClient = code;
    this.readyState = 3;
  }

  framesOf(type: string): Record<string, unknown>[] {
    return this.sent.filter((f) => f.type === type);
  }
}

export function fakeSockets(): { factory: SocketFactory; sockets: FakeSocket[] } {
  const sockets: FakeSocket[] = [];
  return {
    sockets,
    factory: (url) => {
      const socket = new FakeSocket(url);
      sockets.push(socket);
      return socket;
    },
  };
}
