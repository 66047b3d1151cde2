/** Tiny DOM helpers. Text always goes through textContent, never innerHTML. */

export function byId<T extends HTMLElement>(id: string): T {
  const element = document.getElementById(id);
  if (element === null) throw new Error(`missing #${id}`);
  return element as T;
}

export function el<K extends keyof HTMLElementTagNameMap>(tag: K, text?: string, className?: string): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  if (text !== undefined) element.textContent = text;
  if (className !== undefined) element.className = className;
  return element;
}

export function showMessage(target: HTMLElement, text: string, kind: "ok" | "error"): void {
  target.textContent = text;
  target.className = `message ${kind}`;
}

/** Runs a page task whose failure is shown, never dropped silently. */
export function spawn(task: Promise<unknown>, target: HTMLElement): void {
  task.catch(() => {
    showMessage(target, "Something failed; reload this page and retry.", "error");
  });
}
