/**
 * Runs async tasks one after another. Storage read-modify-write cycles of one runtime go through
 * one chain, so two concurrent frames cannot interleave their writes to the same key.
 */
export class SerialChain {
  private tail: Promise<unknown> = Promise.resolve();

  run<T>(task: () => Promise<T>): Promise<T> {
    const result = this.tail.then(task, task);
    this.tail = result.catch(() => undefined);
    return result;
  }
}
