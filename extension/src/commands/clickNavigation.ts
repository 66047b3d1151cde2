/**
 * Where a click would navigate, for the preview of a dry-run `click`: a link or image-map area
 * (`href`, `target`), or a form's submit control (the form's action, method and target, each
 * overridable by the control's `formaction`, `formmethod`, `formtarget`). Anything else, such as a
 * button whose script calls `window.open` or sets `location`, is the page's decision and cannot
 * be known before it runs, so the preview leaves the navigation out.
 *
 * This is a prediction from the DOM, not a guarantee: page script may cancel the click or
 * navigate elsewhere, and an invalid form does not submit. The origin guard enforces the policy
 * on the request itself whatever the preview said.
 */
import type { WritePreview } from "@understudy/protocol";
import type { CommandContext } from "./context";
import { callOnElement } from "./pageCall";

/**
 * Runs in the page with `this` bound to the clicked element; answers
 * `{kind, url, method, target, framed}` or null. The form's `action`, `method` and `target` are read through the prototype getters
 * because a form control named "action" (or "method", "target") shadows the property on the form
 * itself. It reads, never submits and never runs validation (which fires `invalid` events).
 */
const CLICK_NAVIGATION_FUNCTION = `function () {
  let el = this;
  if (el.nodeType !== Node.ELEMENT_NODE) el = el.parentElement;
  if (el === null) return null;
  const base = document.querySelector("base[target]");
  const baseTarget = base === null ? "" : (base.getAttribute("target") || "");
  const framed = (target) => target !== "" && Array.from(document.querySelectorAll("iframe, frame")).some((f) => f.name === target);
  const link = el.closest("a[href], area[href]");
  if (link !== null) {
    const target = link.hasAttribute("target") ? link.getAttribute("target") : baseTarget;
    return { kind: "link", url: link.href, method: "GET", target, framed: framed(target) };
  }
  const control = el.closest("button, input");
  if (control === null || control.disabled) return null;
  const submits = control.tagName === "BUTTON" ? control.type === "submit" : (control.type === "submit" || control.type === "image");
  const form = control.form;
  if (!submits || form === null) return null;
  const read = (name) => Object.getOwnPropertyDescriptor(HTMLFormElement.prototype, name).get.call(form);
  const method = (control.hasAttribute("formmethod") ? control.formMethod : read("method")).toUpperCase();
  if (method !== "GET" && method !== "POST") return null;
  const url = control.hasAttribute("formaction") ? control.formAction : read("action");
  const formTarget = Element.prototype.hasAttribute.call(form, "target") ? read("target") : baseTarget;
  const target = control.hasAttribute("formtarget") ? control.formTarget : formTarget;
  return { kind: "form", url, method, target, framed: framed(target) };
}`;

/** Targets that keep the navigation in the tab's own top-level document. */
const SAME_CONTEXT_TARGETS: ReadonlySet<string> = new Set(["", "_self", "_parent", "_top"]);

interface ClickNavigation {
  readonly kind: "link" | "form";
  readonly url: string;
  readonly method: "GET" | "POST";
  readonly target: string;
  readonly framed: boolean;
}

function asClickNavigation(value: unknown): ClickNavigation | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const { kind, url, method, target, framed } = value as Record<string, unknown>;
  if (kind !== "link" && kind !== "form") return undefined;
  if (typeof url !== "string" || typeof target !== "string") return undefined;
  if (method !== "GET" && method !== "POST") return undefined;
  return { kind, url, method, target, framed: framed === true };
}

/**
 * The navigation part of a click's preview: `navigatesTo`, `method`, `allowed` and `opensPopup`,
 * or nothing when the click has no navigation the DOM declares.
 */
export async function clickNavigationPreview(
  ctx: CommandContext,
  backendNodeId: number,
): Promise<Pick<WritePreview, "navigatesTo" | "method" | "allowed" | "opensPopup"> | undefined> {
  const found = asClickNavigation(await callOnElement(ctx, backendNodeId, CLICK_NAVIGATION_FUNCTION, []));
  // A target naming one of the page's own frames navigates that frame, not the tab.
  if (found === undefined || found.framed) return undefined;
  let url: URL;
  try {
    url = new URL(found.url);
  } catch {
    return undefined;
  }
  // A javascript: link runs script in the page; it is not a navigation the policy can judge.
  if (url.protocol === "javascript:") return undefined;
  // A GET submission replaces the action's query with the form's fields. The fields are left out
  // of the preview on purpose: they may hold what fill_secret typed.
  if (found.kind === "form" && found.method === "GET") url.search = "";
  const navigatesTo = url.toString();
  return {
    navigatesTo,
    method: found.method,
    allowed: ctx.policy.allowsUrl(navigatesTo),
    opensPopup: !SAME_CONTEXT_TARGETS.has(found.target.toLowerCase()),
  };
}
