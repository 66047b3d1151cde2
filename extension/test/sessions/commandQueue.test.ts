import { describe, expect, it } from "vitest";

import { CommandQueue } from "../../src/sessions/commandQueue";

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve: () => void = () => undefined;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

describe("CommandQueue", () => {
  it("runs tasks one at a time in arrival order", async () => {
    const queue = new CommandQueue(() => undefined);
    const events: string[] = [];
    const first = deferred();
    queue.enqueue("a", async () => {
      events.push("a:start");
      await first.promise;
      events.push("a:end");
    });
    queue.enqueue("b", () => {
      events.push("b:start");
      return Promise.resolve();
    });
    await Promise.resolve();
    expect(events).toEqual(["a:start"]);
    expect(queue.current).toBe("a");
    first.resolve();
    await queue.idle();
    expect(events).toEqual(["a:start", "a:end", "b:start"]);
  });

  it("cancels a task that has not started and keeps going after a failing task", async () => {
    const errors: unknown[] = [];
    const queue = new CommandQueue((error) => errors.push(error));
    const ran: string[] = [];
    const gate = deferred();
    queue.enqueue("a", async () => {
      await gate.promise;
      throw new Error("boom");
    });
    queue.enqueue("b", () => {
      ran.push("b");
      return Promise.resolve();
    });
    queue.enqueue("c", () => {
      ran.push("c");
      return Promise.resolve();
    });
    expect(queue.cancel("b")).toBe(true);
    expect(queue.cancel("a")).toBe(false);
    gate.resolve();
    await queue.idle();
    expect(ran).toEqual(["c"]);
    expect(errors).toHaveLength(1);
  });
});
