/**
 * `select_text`: selects text of an element (all of it, a range of it, or the first occurrence of
 * a string in it) or, by string, of the page, with the Selection API (a Range), or in a text field
 * with `setSelectionRange` after focusing it. The text is counted as a snapshot shows it: the
 * rendered text nodes (not those of scripts, styles or hidden elements) with each run of white
 * space as one space, and a block boundary or a line break as a space too, so offsets and a
 * search match what a model read. One page function does
 * the counting, the search and (unless a dry run) the selecting, so the preview and the write
 * agree; it returns the selected text cut to 1,000 characters with its full length. Selecting, it
 * answers once the page's listeners of the selection's event have run (`SELECT_EVENT_WAIT_MS`).
 */
import { SELECT_EVENT_WAIT_MS } from "../constants";
import { CommandError } from "../errors";
import type { SelectTextCommand, TextSelection } from "@understudy/protocol";
import { type CommandContext, type WritePlan, elementPreview, resolveTarget } from "./context";
import { callOnElement } from "./pageCall";

export const MAX_SELECTION_TEXT = 1_000;

type Mode = "all" | "range" | "text";

/**
 * Runs on the element (or the document, for a page-wide search). Arguments: mode, start, end,
 * the text to find, whether to select, the text bound, the longest wait for the selection's
 * event. Answers `{status, ...}`: "ok" with the selection, "empty" (no text), "not_found",
 * "out_of_range" (with the text's length), or "refused" (the page kept the selection from being
 * made, as `user-select: none` does). Selecting, it answers after the selection's event was
 * dispatched: a listener of its own, added after the page's, resolves it.
 */
export const SELECT_FUNCTION = `async function (mode, start, end, needle, apply, maxText, eventWaitMs) {
  const root = this.nodeType === 9 ? (this.body || this.documentElement) : this;
  const FIELD_TYPES = ["text", "search", "url", "tel", "password"];
  const field = root instanceof HTMLTextAreaElement || (root instanceof HTMLInputElement && FIELD_TYPES.includes(root.type));
  let text = "";
  const nodes = [];
  const offsets = [];
  const virtual = [];
  if (field) {
    text = root.value;
  } else {
    const hidden = new Map();
    const isHidden = (el) => {
      if (!hidden.has(el)) {
        const skipped = el.closest("script, style, noscript, template") !== null;
        hidden.set(el, skipped || (typeof el.checkVisibility === "function" && !el.checkVisibility()));
      }
      return hidden.get(el);
    };
    // Blocks and line breaks separate words as white space would, as the snapshot's lines do.
    const blocks = new Map();
    const blockOf = (el) => {
      if (!blocks.has(el)) {
        const display = getComputedStyle(el).display;
        const inline = el !== root && el.parentElement !== null && (display.startsWith("inline") || display === "contents");
        blocks.set(el, inline ? blockOf(el.parentElement) : el);
      }
      return blocks.get(el);
    };
    let space = null;
    let block = null;
    let broken = false;
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT | NodeFilter.SHOW_ELEMENT);
    for (let n = walker.nextNode(); n !== null; n = walker.nextNode()) {
      if (n.nodeType === 1) {
        if (n.localName === "br") broken = true;
        continue;
      }
      if (n.parentElement === null || isHidden(n.parentElement)) continue;
      const own = blockOf(n.parentElement);
      // A separator that is no character of the page: it maps to the start of the next text.
      if ((broken || (block !== null && own !== block)) && text.length > 0 && space === null) space = [n, 0, true];
      block = own;
      broken = false;
      const data = n.data;
      for (let i = 0; i < data.length; i += 1) {
        if (/\\s/.test(data[i])) {
          if (text.length > 0 && space === null) space = [n, i, false];
          continue;
        }
        if (space !== null) {
          text += " ";
          nodes.push(space[0]);
          offsets.push(space[1]);
          virtual.push(space[2]);
          space = null;
        }
        text += data[i];
        nodes.push(n);
        offsets.push(i);
        virtual.push(false);
      }
    }
  }
  let from = 0;
  let to = text.length;
  if (mode === "range") {
    if (end > text.length) return { status: "out_of_range", length: text.length };
    from = start;
    to = end;
  } else if (mode === "text") {
    const wanted = field ? needle : needle.replace(/\\s+/g, " ").trim();
    from = wanted === "" ? -1 : text.indexOf(wanted);
    if (from < 0) return { status: "not_found", length: text.length };
    to = from + wanted.length;
  }
  if (to <= from) return { status: "empty", length: text.length };
  const selected = text.slice(from, to);
  if (apply) {
    const dispatched = (target, type) => new Promise((resolve) => {
      const done = () => { clearTimeout(timer); target.removeEventListener(type, done); resolve(); };
      const timer = setTimeout(done, eventWaitMs);
      target.addEventListener(type, done);
    });
    if (field) {
      root.focus();
      const seen = dispatched(root, "select");
      root.setSelectionRange(from, to);
      await seen;
    } else {
      const range = document.createRange();
      range.setStart(nodes[from], offsets[from]);
      range.setEnd(nodes[to - 1], offsets[to - 1] + (virtual[to - 1] ? 0 : 1));
      const selection = window.getSelection();
      const seen = dispatched(document, "selectionchange");
      selection.removeAllRanges();
      selection.addRange(range);
      if (selection.rangeCount === 0 || selection.toString().trim() === "") return { status: "refused" };
      await seen;
    }
  }
  return { status: "ok", text: selected.slice(0, maxText), length: selected.length, start: from, end: to };
}`;

interface Answer {
  readonly status?: string;
  readonly text?: string;
  readonly length?: number;
  readonly start?: number;
  readonly end?: number;
}

function modeOf(command: SelectTextCommand): Mode {
  const byRange = command.start !== undefined || command.end !== undefined;
  if (byRange && command.text !== undefined) {
    throw new CommandError("invalid_arguments", "Give either text (to find) or start/end (offsets), not both.");
  }
  if (byRange) {
    if (command.start === undefined || command.end === undefined || command.ref === undefined) {
      throw new CommandError("invalid_arguments", "Offsets need start, end and the ref of the element they count in.");
    }
    if (command.end <= command.start) throw new CommandError("invalid_arguments", `end (${String(command.end)}) must be greater than start (${String(command.start)}).`);
    return "range";
  }
  if (command.text !== undefined) return "text";
  if (command.ref === undefined) {
    throw new CommandError("invalid_arguments", "Say what to select: a ref (its whole text), a ref with start/end, or text to find (in a ref or the page).");
  }
  return "all";
}

async function documentNodeId(ctx: CommandContext): Promise<number> {
  const answer = await ctx.cdp.send<{ root?: { backendNodeId?: number } }>("DOM.getDocument", { depth: 0 });
  const id = answer.root?.backendNodeId;
  if (id === undefined) throw new CommandError("element_not_interactable", "The page has no document to select in yet; wait for it to load, then try again.");
  return id;
}

function toSelection(answer: Answer, command: SelectTextCommand): TextSelection {
  switch (answer.status ?? "") {
    case "ok":
      return { text: String(answer.text ?? ""), length: Number(answer.length ?? 0), start: Number(answer.start ?? 0), end: Number(answer.end ?? 0) };
    case "not_found":
      throw new CommandError(
        "invalid_arguments",
        `The text ${JSON.stringify((command.text ?? "").slice(0, 80))} is not in ${command.ref === undefined ? "the page's" : "the element's"} visible text; take a snapshot and copy the text as it reads there.`,
      );
    case "out_of_range":
      throw new CommandError("invalid_arguments", `end (${String(command.end)}) is past the element's text, which has ${String(answer.length)} characters.`);
    case "empty":
      throw new CommandError("element_not_interactable", "The element has no visible text to select; pick an element whose text the snapshot shows.");
    case "refused":
      throw new CommandError("element_not_interactable", "The page does not let this text be selected (user-select: none, or a handler undid the selection); nothing is selected.");
    default:
      throw new CommandError("element_not_interactable", "The page gave no answer about the text; take a new snapshot and try again.");
  }
}

export async function planSelectText(ctx: CommandContext, command: SelectTextCommand, dryRun: boolean): Promise<WritePlan> {
  const mode = modeOf(command);
  const target = command.ref === undefined ? undefined : await resolveTarget(ctx, command.ref);
  const nodeId = target?.backendNodeId ?? (await documentNodeId(ctx));
  const run = async (apply: boolean): Promise<TextSelection> => {
    const args = [mode, command.start ?? 0, command.end ?? 0, command.text ?? "", apply, MAX_SELECTION_TEXT, SELECT_EVENT_WAIT_MS];
    const answer = await callOnElement(ctx, nodeId, SELECT_FUNCTION, args, { awaitPromise: true });
    return toSelection(typeof answer === "object" && answer !== null ? answer : {}, command);
  };
  // The dry run asks the same function without selecting, so a text that is not there fails here.
  const preview = { ...(target === undefined ? { allowed: true } : elementPreview(target)), ...(dryRun ? { selection: await run(false) } : {}) };
  return {
    preview,
    act: async () => ({ selection: await run(true) }),
  };
}
