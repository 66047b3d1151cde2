/**
 * Keyboard and form writes: `focus`, `type`, `fill`, `fill_secret`, `press_key`, `select_option`,
 * `set_checked`. `fill_secret` is `fill` with the plaintext from the grant frame: it is passed to
 * the page as a CDP call argument and nowhere else; the page function returns a status word only,
 * so the value cannot come back in a result or an error. A dry run of `fill` or `fill_secret`
 * runs the same page function with `apply` false: it checks the field is fillable and changes
 * nothing. A dry-run grant carries no plaintext (the backend only checked the secret exists).
 */
import { CommandError, StaleAuthorityError } from "../errors";
import type {
  FillCommand,
  FillSecretCommand,
  FocusCommand,
  PressKeyCommand,
  SelectOptionCommand,
  SetCheckedCommand,
  TypeCommand,
} from "@understudy/protocol";
import { type CommandContext, type WritePlan, elementPreview, resolveTarget } from "./context";
import { MODIFIER_BITS, keyDefinition } from "./keys";
import { callOnElement } from "./pageCall";

/**
 * Sets a text control's value the way a user edit would, so frameworks see input and change.
 * With `apply` false it only answers whether it would: one definition of "fillable" for the
 * write and its dry run.
 */
const FILL_FUNCTION = `function (value, apply) {
  const el = this;
  if (el.isContentEditable) {
    if (!apply) return "ok";
    el.focus();
    el.textContent = value;
    el.dispatchEvent(new InputEvent("input", { bubbles: true }));
    return "ok";
  }
  const tag = el.tagName;
  const nonText = ["checkbox", "radio", "file", "submit", "button", "image", "reset", "hidden", "range", "color"];
  if (tag !== "INPUT" && tag !== "TEXTAREA") return "not_editable";
  if (tag === "INPUT" && nonText.includes(el.type)) return "not_editable";
  if (el.disabled || el.readOnly) return "not_editable";
  if (!apply) return "ok";
  el.focus();
  const proto = tag === "INPUT" ? HTMLInputElement.prototype : HTMLTextAreaElement.prototype;
  Object.getOwnPropertyDescriptor(proto, "value").set.call(el, value);
  el.dispatchEvent(new Event("input", { bubbles: true }));
  el.dispatchEvent(new Event("change", { bubbles: true }));
  return "ok";
}`;

const SELECT_FUNCTION = `function (values) {
  const el = this;
  if (el.tagName !== "SELECT" || el.disabled) return "not_select";
  const options = Array.from(el.options);
  const missing = values.filter((v) => !options.some((o) => o.value === v)).length;
  if (missing > 0) return "missing:" + missing;
  if (!el.multiple && values.length > 1) return "not_multiple";
  for (const option of options) option.selected = values.includes(option.value);
  el.dispatchEvent(new Event("input", { bubbles: true }));
  el.dispatchEvent(new Event("change", { bubbles: true }));
  return "ok";
}`;

const SET_CHECKED_FUNCTION = `function (checked) {
  const el = this;
  if (el.tagName !== "INPUT" || (el.type !== "checkbox" && el.type !== "radio") || el.disabled) return "not_checkable";
  if (el.checked === checked) return "ok";
  if (el.type === "radio" && !checked) return "radio_uncheck";
  el.click();
  return el.checked === checked ? "ok" : "unchanged";
}`;

/** Runs a page function that answers with a status word (anything else reads as "unknown"). */
async function statusOf(ctx: CommandContext, backendNodeId: number, functionDeclaration: string, ...args: readonly unknown[]): Promise<string> {
  const value = await callOnElement(ctx, backendNodeId, functionDeclaration, args);
  return typeof value === "string" ? value : "unknown";
}

/** Fills the element with `value`; with `apply` false, only checks that it could. */
async function fillElement(ctx: CommandContext, backendNodeId: number, value: string, apply: boolean): Promise<void> {
  const status = await statusOf(ctx, backendNodeId, FILL_FUNCTION, value, apply);
  if (status !== "ok") {
    throw new CommandError("element_not_interactable", "The element is not an editable text field (or is disabled or read-only); pick a textbox from the snapshot.");
  }
}

/**
 * Time `type` keeps in hand before the deadline to stop typing, let the write's settle window run
 * and deliver its result.
 */
export const TYPE_DEADLINE_RESERVE_MS = 1_500;

/** Characters a key of a US keyboard produces: printable ASCII. */
const KEYED_CHARACTER = /^[\x20-\x7e]$/;

/** Characters whose events are sent together before the deadline is looked at again. */
export const TYPE_CHUNK_CHARACTERS = 16;

/**
 * Types `text` a key press per character, as a person would: keyDown with the character's text
 * (Chromium then fires keydown, keypress, beforeinput and input) and keyUp. Characters no key
 * produces (emoji, CJK, accented letters) reach the page as an input method delivers them, a
 * text insertion with input events and no key events; so do control characters such as "\n",
 * which as text never press Enter (and submit a form) by surprise: `submit` does that.
 *
 * The events of up to `TYPE_CHUNK_CHARACTERS` characters are sent together rather than each
 * after the previous one's answer: the debugger session delivers them in order and the browser
 * queues input for the page, so the page sees the same events in the same order; only the waits
 * for each acknowledgement overlap.
 */
async function typeByKeys(ctx: CommandContext, text: string): Promise<void> {
  const characters = [...text];
  let typed = 0;
  while (typed < characters.length) {
    // A key press costs a few milliseconds (two CDP round trips), so long text can outlast the
    // command: stop in time to answer a durable failure that says how far typing got, rather
    // than run past the deadline into an unknown outcome.
    if (ctx.deadlineMs - ctx.now() < TYPE_DEADLINE_RESERVE_MS) {
      throw new CommandError(
        "deadline_exceeded",
        `Typed ${typed} of ${characters.length} characters before the command's deadline; the field holds the text up to there. ` +
          'Key-by-key typing takes a few milliseconds a character: send long text with delivery "insert" (or fill), or type the rest in shorter pieces.',
      );
    }
    const chunk = characters.slice(typed, typed + TYPE_CHUNK_CHARACTERS);
    const sends: Promise<unknown>[] = [];
    let pending = "";
    const flush = (): void => {
      if (pending === "") return;
      sends.push(ctx.cdp.send("Input.insertText", { text: pending }));
      pending = "";
    };
    for (const character of chunk) {
      const definition = KEYED_CHARACTER.test(character) ? keyDefinition(character) : undefined;
      if (definition?.text === undefined) {
        pending += character;
        continue;
      }
      flush();
      const base = { key: definition.key, code: definition.code, windowsVirtualKeyCode: definition.keyCode, modifiers: 0 };
      sends.push(ctx.cdp.send("Input.dispatchKeyEvent", { ...base, type: "keyDown", text: definition.text, unmodifiedText: definition.text }));
      sends.push(ctx.cdp.send("Input.dispatchKeyEvent", { ...base, type: "keyUp" }));
    }
    flush();
    await Promise.all(sends);
    typed += chunk.length;
  }
}

/** How `type` hands its text to the page; chosen (and an unknown choice refused) before acting. */
function deliveryOf(ctx: CommandContext, delivery: NonNullable<TypeCommand["delivery"]>): (text: string) => Promise<void> {
  switch (delivery) {
    case "keys":
      return (text) => typeByKeys(ctx, text);
    case "insert":
      return async (text) => {
        await ctx.cdp.send("Input.insertText", { text });
      };
    default: {
      const unreachable: never = delivery;
      throw new CommandError("invalid_arguments", `${String(unreachable).slice(0, 32)} is not a delivery; use keys or insert.`);
    }
  }
}

export async function planFocus(ctx: CommandContext, command: FocusCommand): Promise<WritePlan> {
  const target = await resolveTarget(ctx, command.ref);
  return {
    preview: elementPreview(target),
    act: async () => {
      try {
        await ctx.cdp.send("DOM.focus", { backendNodeId: target.backendNodeId });
      } catch (error) {
        if (error instanceof StaleAuthorityError) throw error;
        // Chromium refuses a node that cannot take focus (plain text, a disabled control, an
        // element with no tabindex); nothing on the page changed.
        throw new CommandError(
          "element_not_interactable",
          "The element cannot take keyboard focus (not a control, disabled, or without tabindex); take a snapshot and pick a field, button or link.",
        );
      }
    },
  };
}

export async function planType(ctx: CommandContext, command: TypeCommand): Promise<WritePlan> {
  const target = await resolveTarget(ctx, command.ref);
  const deliver = deliveryOf(ctx, command.delivery ?? "keys");
  return {
    preview: elementPreview(target),
    act: async () => {
      await ctx.cdp.send("DOM.focus", { backendNodeId: target.backendNodeId });
      if (command.text !== "") await deliver(command.text);
      if (command.submit === true) await pressKey(ctx, "Enter", 0);
    },
  };
}

export async function planFill(ctx: CommandContext, command: FillCommand, dryRun: boolean): Promise<WritePlan> {
  const target = await resolveTarget(ctx, command.ref);
  if (dryRun) await fillElement(ctx, target.backendNodeId, "", false);
  return { preview: elementPreview(target), act: () => fillElement(ctx, target.backendNodeId, command.value, true) };
}

export async function planFillSecret(ctx: CommandContext, command: FillSecretCommand, dryRun: boolean, secretValue: string | undefined): Promise<WritePlan> {
  if (dryRun) {
    // The backend granted the dry run only after finding the secret in the vault; it sends no
    // plaintext, and none is needed to check the field.
    const target = await resolveTarget(ctx, command.ref);
    await fillElement(ctx, target.backendNodeId, "", false);
    return {
      preview: elementPreview(target),
      act: () => Promise.reject(new CommandError("invalid_arguments", "A dry run never fills; submit the write without dryRun.")),
    };
  }
  if (secretValue === undefined) {
    throw new CommandError("secret_not_found", "The grant carried no secret value for this secretRef; check that the vault holds it.");
  }
  const target = await resolveTarget(ctx, command.ref);
  return { preview: elementPreview(target), act: () => fillElement(ctx, target.backendNodeId, secretValue, true) };
}

async function pressKey(ctx: CommandContext, key: string, modifiers: number): Promise<void> {
  const definition = keyDefinition(key);
  if (definition === undefined) {
    throw new CommandError("invalid_arguments", `${key.slice(0, 32)} is not a key; use a KeyboardEvent.key value such as Enter, Tab or a.`);
  }
  const text = modifiers & (MODIFIER_BITS.Control | MODIFIER_BITS.Alt | MODIFIER_BITS.Meta) ? undefined : definition.text;
  const base = { key: definition.key, code: definition.code, windowsVirtualKeyCode: definition.keyCode, modifiers };
  await ctx.cdp.send("Input.dispatchKeyEvent", text === undefined ? { ...base, type: "rawKeyDown" } : { ...base, type: "keyDown", text, unmodifiedText: text });
  await ctx.cdp.send("Input.dispatchKeyEvent", { ...base, type: "keyUp" });
}

export function planPressKey(ctx: CommandContext, command: PressKeyCommand): WritePlan {
  if (keyDefinition(command.key) === undefined) {
    throw new CommandError("invalid_arguments", `${command.key.slice(0, 32)} is not a key; use a KeyboardEvent.key value such as Enter, Tab or a.`);
  }
  const modifiers = (command.modifiers ?? []).reduce((bits, name) => bits | MODIFIER_BITS[name], 0);
  return { preview: { allowed: true }, act: () => pressKey(ctx, command.key, modifiers) };
}

export async function planSelectOption(ctx: CommandContext, command: SelectOptionCommand): Promise<WritePlan> {
  const target = await resolveTarget(ctx, command.ref);
  return {
    preview: elementPreview(target),
    act: async () => {
      const status = await statusOf(ctx, target.backendNodeId, SELECT_FUNCTION, command.values);
      if (status === "ok") return;
      if (status.startsWith("missing:")) {
        throw new CommandError("invalid_arguments", `${status.slice(8)} of the values are not options of this select; take a snapshot to see its options.`);
      }
      if (status === "not_multiple") throw new CommandError("invalid_arguments", "This select takes one value; pass exactly one.");
      throw new CommandError("element_not_interactable", "The element is not an enabled <select>; pick a combobox from the snapshot.");
    },
  };
}

export async function planSetChecked(ctx: CommandContext, command: SetCheckedCommand): Promise<WritePlan> {
  const target = await resolveTarget(ctx, command.ref);
  return {
    preview: elementPreview(target),
    act: async () => {
      const status = await statusOf(ctx, target.backendNodeId, SET_CHECKED_FUNCTION, command.checked);
      if (status === "ok") return;
      if (status === "radio_uncheck") {
        throw new CommandError("invalid_arguments", "A radio button cannot be unchecked directly; check another radio of its group.");
      }
      throw new CommandError("element_not_interactable", "The element is not an enabled checkbox or radio button, or the page kept it unchanged.");
    },
  };
}
