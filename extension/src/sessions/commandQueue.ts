/**
 * First-in, first-out, single-flight command queue of one runtime: one command runs at a time,
 * in arrival order. A task that has not started can be cancelled. Tasks report their own
 * outcomes; a task that throws anyway is reported to `onError` and the queue moves on.
 */
interface QueuedTask {
  readonly id: string;
  readonly run: () => Promise<void>;
}

export class CommandQueue {
  private readonly waiting: QueuedTask[] = [];
  private running: string | undefined;
  private drained: Promise<void> = Promise.resolve();
  private pumping = false;

  constructor(private readonly onError: (error: unknown) => void) {}

  /** The id of the task running now, if any. */
  get current(): string | undefined {
    return this.running;
  }

  get size(): number {
    return this.waiting.length + (this.running === undefined ? 0 : 1);
  }

  enqueue(id: string, run: () => Promise<void>): void {
    this.waiting.push({ id, run });
    if (!this.pumping) {
      this.pumping = true;
      this.drained = this.pump();
    }
  }

  /** Removes a task that has not started; returns whether one was removed. */
  cancel(id: string): boolean {
    const index = this.waiting.findIndex((task) => task.id === id);
    if (index < 0) return false;
    this.waiting.splice(index, 1);
    return true;
  }

  /** Resolves once every queued task has finished. */
  idle(): Promise<void> {
    return this.drained;
  }

  private async pump(): Promise<void> {
    for (let task = this.waiting.shift(); task !== undefined; task = this.waiting.shift()) {
      this.running = task.id;
      try {
        await task.run();
      } catch (error) {
        this.onError(error);
      } finally {
        this.running = undefined;
      }
    }
    this.pumping = false;
  }
}
