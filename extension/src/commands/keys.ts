/**
 * DOM `KeyboardEvent.key` values to the fields Input.dispatchKeyEvent needs. Named keys come from
 * a table; a single printable character maps to itself.
 */

export interface KeyDefinition {
  readonly key: string;
  readonly code: string;
  readonly keyCode: number;
  /** Text the key inserts, if any. */
  readonly text?: string;
}

const NAMED_KEYS: Readonly<Record<string, KeyDefinition>> = {
  Enter: { key: "Enter", code: "Enter", keyCode: 13, text: "\r" },
  Tab: { key: "Tab", code: "Tab", keyCode: 9 },
  Escape: { key: "Escape", code: "Escape", keyCode: 27 },
  Backspace: { key: "Backspace", code: "Backspace", keyCode: 8 },
  Delete: { key: "Delete", code: "Delete", keyCode: 46 },
  ArrowUp: { key: "ArrowUp", code: "ArrowUp", keyCode: 38 },
  ArrowDown: { key: "ArrowDown", code: "ArrowDown", keyCode: 40 },
  ArrowLeft: { key: "ArrowLeft", code: "ArrowLeft", keyCode: 37 },
  ArrowRight: { key: "ArrowRight", code: "ArrowRight", keyCode: 39 },
  Home: { key: "Home", code: "Home", keyCode: 36 },
  End: { key: "End", code: "End", keyCode: 35 },
  PageUp: { key: "PageUp", code: "PageUp", keyCode: 33 },
  PageDown: { key: "PageDown", code: "PageDown", keyCode: 34 },
  " ": { key: " ", code: "Space", keyCode: 32, text: " " },
  Space: { key: " ", code: "Space", keyCode: 32, text: " " },
  Shift: { key: "Shift", code: "ShiftLeft", keyCode: 16 },
  Control: { key: "Control", code: "ControlLeft", keyCode: 17 },
  Alt: { key: "Alt", code: "AltLeft", keyCode: 18 },
  Meta: { key: "Meta", code: "MetaLeft", keyCode: 91 },
};

for (let n = 1; n <= 12; n += 1) {
  (NAMED_KEYS as Record<string, KeyDefinition>)[`F${n}`] = { key: `F${n}`, code: `F${n}`, keyCode: 111 + n };
}

/** CDP modifier bits. */
export const MODIFIER_BITS: Readonly<Record<"Alt" | "Control" | "Meta" | "Shift", number>> = { Alt: 1, Control: 2, Meta: 4, Shift: 8 };

/** The definition of a key, or undefined when the value is neither named nor one character. */
export function keyDefinition(key: string): KeyDefinition | undefined {
  const named = NAMED_KEYS[key];
  if (named !== undefined) return named;
  if ([...key].length !== 1) return undefined;
  const upper = key.toUpperCase();
  if (/^[a-z]$/i.test(key)) return { key, code: `Key${upper}`, keyCode: upper.charCodeAt(0), text: key };
  if (/^[0-9]$/.test(key)) return { key, code: `Digit${key}`, keyCode: key.charCodeAt(0), text: key };
  return { key, code: "", keyCode: 0, text: key };
}
