import { describe, expect, it } from "vitest";

import { socketUrlMatchesService, withTicket } from "../../src/net/urls";

describe("socket URLs", () => {
  it("adds the ticket once", () => {
    expect(withTicket("ws://127.0.0.1:8787/v1/sessions/s/socket", "t1")).toBe("ws://127.0.0.1:8787/v1/sessions/s/socket?ticket=t1");
    expect(withTicket("ws://127.0.0.1:8787/v1/device/socket?ticket=t1", "t1")).toBe("ws://127.0.0.1:8787/v1/device/socket?ticket=t1");
  });

  it("accepts only ws on the service host for http and wss for https", () => {
    expect(socketUrlMatchesService("ws://127.0.0.1:8787/v1/device/socket", "http://127.0.0.1:8787")).toBe(true);
    expect(socketUrlMatchesService("wss://u.example.com/v1/device/socket", "https://u.example.com")).toBe(true);
    expect(socketUrlMatchesService("ws://u.example.com/v1/device/socket", "https://u.example.com")).toBe(false);
    expect(socketUrlMatchesService("wss://evil.example.net/", "https://u.example.com")).toBe(false);
    expect(socketUrlMatchesService("ws://127.0.0.1:9999/", "http://127.0.0.1:8787")).toBe(false);
  });
});
