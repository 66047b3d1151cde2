/**
 * Socket URL handling. Tickets ride in the socket URL's query; credentials never do. A socket URL
 * is accepted only on the service origin's host (ws for http, wss for https), so a ticket is never
 * sent anywhere else.
 */

/** Adds `ticket` to the socket URL's query unless the backend already put it there. */
export function withTicket(socketUrl: string, ticket: string): string {
  const url = new URL(socketUrl);
  if (url.searchParams.get("ticket") !== ticket) url.searchParams.set("ticket", ticket);
  return url.toString();
}

/** Whether `socketUrl` is a WebSocket URL on the same host as `serviceOrigin`. */
export function socketUrlMatchesService(socketUrl: string, serviceOrigin: string): boolean {
  let socket: URL;
  let service: URL;
  try {
    socket = new URL(socketUrl);
    service = new URL(serviceOrigin);
  } catch {
    return false;
  }
  const expectedScheme = service.protocol === "https:" ? "wss:" : "ws:";
  return socket.protocol === expectedScheme && socket.host === service.host && socket.username === "" && socket.password === "";
}
