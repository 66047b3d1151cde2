/**
 * The compact snapshot: the page as text for a model's context, one line per node.
 *
 *   h1 Sign in
 *   textbox "Username" [g2e13]
 *   Read the [terms](g2e20) first.
 *
 * A line holds a role, a name, a value and states, and a ref in brackets when a user can act on
 * the node; links read `[text](ref)` inside the text around them. What a model cannot use is left
 * out: wrappers without a name (generic, paragraph, list, label), list markers and separators,
 * the text of a control that its name already says, and fields that are empty. Nesting is shown
 * only under landmarks and containers, one space per level; a `main` that is the page's only
 * landmark is left out, as it tells nothing apart. Pure: snapshot.ts gives it a tree whose
 * refs are already minted.
 */
import type { CutText, PageNode } from "./snapshotTree";
import { GRAPHIC_ROLES, walk } from "./snapshotTree";

export interface Line {
  readonly depth: number;
  readonly text: string;
  /** The role the line counts as when it is left out of a bounded snapshot. */
  readonly role: string;
  readonly ref?: string;
}

/** Controls whose content is their name: their children are not written again. */
const LEAF_CONTROLS: ReadonlySet<string> = new Set([
  "button", "checkbox", "link", "menuitem", "menuitemcheckbox", "menuitemradio", "option", "radio",
  "searchbox", "slider", "spinbutton", "switch", "tab", "textbox", "treeitem", "ComboBoxSelect",
  "image", "img", "Canvas", "graphics-document", "graphics-object", "graphics-symbol", "SvgRoot",
]);

/** Roles whose content flows inside the text around them. */
const INLINE_ROLES: ReadonlySet<string> = new Set([
  "StaticText", "strong", "emphasis", "code", "subscript", "superscript", "mark", "time", "abbr", "Abbr",
  "deletion", "insertion", "Ruby", "RubyAnnotation",
]);

/** Roles that say nothing a model can use: left out with their content. */
const DROPPED_ROLES: ReadonlySet<string> = new Set(["InlineTextBox", "ListMarker", "separator"]);

/** Links, and the DPUB-ARIA roles that are links (a footnote reference, a back link). */
const LINK_ROLES: ReadonlySet<string> = new Set(["link", "doc-noteref", "doc-backlink", "doc-biblioref", "doc-glossref"]);

/**
 * Roles written as a line even without a name: their children are nested under them. A form is
 * not among them: unnamed, it says no more than its fields do (a named one gets its line).
 */
const CONTAINER_ROLES: ReadonlySet<string> = new Set([
  "navigation", "main", "banner", "contentinfo", "complementary", "search", "dialog", "alertdialog",
  "alert", "status", "log", "table", "grid", "treegrid", "menu", "menubar", "listbox", "tablist", "tabpanel",
  "tree", "radiogroup", "toolbar", "Iframe", "combobox", "video", "audio",
]);

/** Roles that are wrappers even when Chromium computes a name for them (from their content). */
const WRAPPER_ROLES: ReadonlySet<string> = new Set([
  "generic", "none", "presentation", "paragraph", "LabelText", "list", "listitem", "Section", "Div", "Pre",
  "blockquote", "DescriptionList", "DescriptionListTerm", "DescriptionListDetail", "term", "definition",
  "rowgroup", "MenuListPopup", "figure", "caption", "FigureCaption", "article", "group", "region", "Legend",
  "RootWebArea", "code", "emphasis", "strong", "row", "cell", "gridcell", "columnheader", "rowheader",
]);

const CELL_ROLES: ReadonlySet<string> = new Set(["cell", "gridcell", "columnheader", "rowheader"]);

/**
 * The ref the compact form writes: only on what a user can act on (a control, anything focusable,
 * a graphic). A snapshot in both forms mints refs on every element for the structured nodes; the
 * text must not become longer for it.
 */
function refOf(node: PageNode): string | undefined {
  return node.interactive || node.clickable === true || GRAPHIC_ROLES.has(node.role) ? node.ref : undefined;
}

/** States written as words, in this order. */
function states(node: PageNode): string[] {
  const words: string[] = [];
  if (node.multiline === true) words.push("multiline");
  if (node.secret === true) words.push("password");
  // Unchecked is the default a model assumes when `checked` is absent, as in ARIA snapshots.
  if (node.checked === true) words.push("checked");
  else if (node.checked === "mixed") words.push("mixed");
  if (node.selected === true) words.push("selected");
  if (node.expanded === true) words.push("expanded");
  else if (node.expanded === false) words.push("collapsed");
  if (node.required === true) words.push("required");
  if (node.readonly === true) words.push("readonly");
  if (node.disabled === true) words.push("disabled");
  if (node.focused === true) words.push("focused");
  if (node.clickable === true) words.push("clickable");
  return words;
}

/** A cut text says so, with its full length, so a model never mistakes a prefix for the whole. */
function cutMarker(value: CutText): string {
  return value.fullLength === undefined ? "" : `…[cut: ${String(value.fullLength)} chars]`;
}

function quoted(value: CutText): string {
  return `${JSON.stringify(value.text)}${cutMarker(value)}`;
}

function collapse(raw: string): string {
  return raw.replace(/\s+/g, " ").trim();
}

const BARE_ATTRIBUTE = /^[^\s"\]]+$/;

function attributeText(attributes: Readonly<Record<string, string>> | undefined): string[] {
  if (attributes === undefined) return [];
  return Object.entries(attributes).map(([key, value]) => `${key}=${BARE_ATTRIBUTE.test(value) ? value : JSON.stringify(value)}`);
}

/** Tags a graphic is written as; anything else (an SVG shape, `<object>`) by its role. */
const GRAPHIC_TAGS: ReadonlySet<string> = new Set(["img", "svg", "canvas"]);

function graphicLabel(node: PageNode): string {
  if (node.tag !== undefined && GRAPHIC_TAGS.has(node.tag)) return node.tag;
  return node.role === "Canvas" ? "canvas" : "img";
}

function roleLabel(node: PageNode): string {
  if (GRAPHIC_ROLES.has(node.role)) return graphicLabel(node);
  if (node.richText === true && node.role === "generic") return "editor";
  return node.role;
}

function linkText(node: PageNode, inner: string): string {
  const name = collapse(node.name.text) || collapse(inner);
  return `[${name}${cutMarker(node.name)}](${refOf(node) ?? ""})`;
}

/** The one line of a control, graphic or named node. */
function describe(node: PageNode): string {
  const parts = [roleLabel(node)];
  const name = collapse(node.name.text);
  if (name !== "") parts.push(quoted({ text: name, ...(node.name.fullLength === undefined ? {} : { fullLength: node.name.fullLength }) }));
  if (node.role === "heading" && node.level !== undefined) parts[0] = `h${String(node.level)}`;
  if (node.value !== undefined && node.secret !== true) parts.push(`=${quoted(node.value)}`);
  parts.push(...states(node), ...attributeText(node.attributes));
  const ref = refOf(node);
  if (ref !== undefined) parts.push(`[${ref}]`);
  return parts.join(" ");
}

/** Landmarks: the regions a page is divided into, which nesting tells apart. */
const LANDMARK_ROLES: ReadonlySet<string> = new Set(["main", "navigation", "banner", "contentinfo", "complementary", "search", "form", "region"]);

/**
 * The `main` of a page that has no other landmark: nothing to tell its content apart from, so it
 * gets no line and its content no indent (the repeated ancestry of every line on the page).
 */
function soleMain(root: PageNode): PageNode | undefined {
  let main: PageNode | undefined;
  for (const { node } of walk(root)) {
    if (!LANDMARK_ROLES.has(node.role)) continue;
    // An unnamed form or region is no landmark (ARIA), and is not written as one either.
    if ((node.role === "form" || node.role === "region") && collapse(node.name.text) === "") continue;
    if (node.role !== "main" || main !== undefined) return undefined;
    main = node;
  }
  return main;
}

interface Writer {
  readonly lines: Line[];
  readonly flattened?: PageNode;
  run: string;
  runRole: string;
  runDepth: number;
}

function flush(w: Writer): void {
  // Chromium normalises the white space of flowing text, so a newline in it is preformatted text
  // (code): each of its lines keeps its indent.
  w.run.split("\n").forEach((piece, i) => {
    const indent = i === 0 ? "" : (/^[ \t]*/.exec(piece)?.[0] ?? "").replace(/\t/g, "  ");
    const line = collapse(piece);
    if (line !== "") w.lines.push({ depth: w.runDepth, text: `${indent}${line}`, role: w.runRole });
  });
  w.run = "";
  w.runRole = "StaticText";
}

function append(w: Writer, depth: number, piece: string, role: string): void {
  if (w.run === "") {
    w.runDepth = depth;
    w.runRole = role;
  }
  w.run += piece;
}

/** True when everything under the node can be written inside one line of text. */
function isInline(node: PageNode): boolean {
  if (DROPPED_ROLES.has(node.role)) return true;
  if (LINK_ROLES.has(node.role)) return refOf(node) !== undefined;
  if (!INLINE_ROLES.has(node.role) || node.interactive) return false;
  return node.children.every(isInline);
}

/** The inline content of a node as text, links as `[text](ref)`. */
function inlineText(node: PageNode): string {
  if (DROPPED_ROLES.has(node.role)) return "";
  if (node.role === "StaticText") return `${node.name.text}${cutMarker(node.name)}`;
  if (LINK_ROLES.has(node.role)) return linkText(node, node.children.map(inlineText).join(""));
  return node.children.map(inlineText).join("");
}

function isNamedNonWrapper(node: PageNode): boolean {
  return collapse(node.name.text) !== "" && !WRAPPER_ROLES.has(node.role) && !INLINE_ROLES.has(node.role);
}

/** A row whose cells are all plain text and links reads as `a | b | c`. */
function rowText(node: PageNode): string | undefined {
  if (node.role !== "row") return undefined;
  const cells: string[] = [];
  for (const cell of node.children) {
    if (!CELL_ROLES.has(cell.role) || cell.interactive || !cell.children.every(isInline)) return undefined;
    cells.push(collapse(inlineText(cell)));
  }
  return cells.join(" | ");
}

function emit(w: Writer, node: PageNode, depth: number, interactiveOnly: boolean): void {
  const ref = refOf(node);
  if (DROPPED_ROLES.has(node.role)) return;
  if (node.role === "LineBreak") {
    append(w, depth, "\n", "StaticText");
    return;
  }
  if (node.role === "StaticText") {
    if (!interactiveOnly) append(w, depth, inlineText(node), "StaticText");
    return;
  }
  // An empty wrapper (a span that is only an anchor target) says nothing and must not break the
  // text around it into two lines.
  if (node.children.length === 0 && ref === undefined && !isNamedNonWrapper(node) && !GRAPHIC_ROLES.has(node.role)) return;
  if (LINK_ROLES.has(node.role) && ref !== undefined && node.children.every(isInline)) {
    if (interactiveOnly) {
      flush(w);
      w.lines.push({ depth: 0, text: linkText(node, node.children.map(inlineText).join("")), role: node.role, ref });
    } else append(w, depth, linkText(node, node.children.map(inlineText).join("")), node.role);
    return;
  }
  if (INLINE_ROLES.has(node.role) && !node.interactive && !isNamedNonWrapper(node)) {
    for (const child of node.children) emit(w, child, depth, interactiveOnly);
    return;
  }
  flush(w);
  if (interactiveOnly) {
    if (ref !== undefined) w.lines.push({ depth: 0, text: describe(node), role: node.role, ref });
    if (!LEAF_CONTROLS.has(node.role)) for (const child of node.children) emit(w, child, 0, true);
    flush(w);
    return;
  }
  if (node.role === "heading" && node.children.every(isInline)) {
    const inner = collapse(node.children.map(inlineText).join("")) || collapse(node.name.text);
    w.lines.push({ depth, text: `h${String(node.level ?? "")} ${inner}`.trimEnd(), role: "heading" });
    return;
  }
  const row = rowText(node);
  if (row !== undefined) {
    if (row.replace(/[\s|]/g, "") !== "") w.lines.push({ depth, text: row, role: "row" });
    return;
  }
  const ownLine = ref !== undefined || CONTAINER_ROLES.has(node.role) || node.role === "heading" || isNamedNonWrapper(node);
  // A flattened main that a user can act on (`tabindex=-1`, a skip link's target) keeps its line.
  const flattened = node === w.flattened && ref === undefined;
  if (ownLine && node.role !== "RootWebArea" && !flattened) {
    w.lines.push({ depth, text: describe(node), role: node.role, ...(ref === undefined ? {} : { ref }) });
    if (LEAF_CONTROLS.has(node.role)) return;
    const first = w.lines.length;
    for (const child of node.children) emit(w, child, depth + 1, false);
    flush(w);
    // The text its name already says (a heading whose name is its text beside an image) is not
    // written again under it.
    const name = collapse(node.name.text);
    if (name !== "") {
      const kept = w.lines.slice(first).filter((l) => l.role !== "StaticText" || !repeatsName(name, l.text.trim()));
      w.lines.splice(first, w.lines.length - first, ...kept);
    }
  } else {
    for (const child of node.children) emit(w, child, depth, false);
  }
  flush(w);
}

/** Shorter than this, a text inside a name may be a coincidence (a page number), not a repeat. */
const MIN_REPEAT_CHARS = 4;

function repeatsName(name: string, text: string): boolean {
  return text === name || (text.length >= MIN_REPEAT_CHARS && name.includes(text));
}

/** The text a line repeats of a control next to it: a label before its field, a caption after. */
function repeatsNeighbour(lines: readonly Line[], index: number): boolean {
  const line = lines[index];
  if (line === undefined || line.role !== "StaticText") return false;
  const label = line.text.replace(/[:*\s]+$/, "").toLowerCase();
  if (label === "") return true;
  for (const other of [lines[index - 1], lines[index + 1]]) {
    if (other?.ref === undefined) continue;
    const match = /"((?:[^"\\]|\\.)*)"/.exec(other.text);
    if (match?.[1] !== undefined && match[1].toLowerCase() === label) return true;
  }
  return false;
}

/** The compact lines of a page, in document order. */
export function compactLines(root: PageNode, interactiveOnly: boolean): Line[] {
  const main = soleMain(root);
  const w: Writer = { lines: [], run: "", runRole: "StaticText", runDepth: 0, ...(main === undefined ? {} : { flattened: main }) };
  emit(w, root, 0, interactiveOnly);
  flush(w);
  return w.lines.filter((_, i) => !repeatsNeighbour(w.lines, i));
}

/** A line as written: one space of indent per level. */
export function renderLine(line: Line): string {
  return `${" ".repeat(line.depth)}${line.text}`;
}

/** Lines past the bound are left out and counted per role. */
export function boundLines(lines: readonly Line[], maxLines: number): { kept: Line[]; omitted: Record<string, number> } {
  const omitted: Record<string, number> = {};
  for (const line of lines.slice(maxLines)) omitted[line.role] = (omitted[line.role] ?? 0) + 1;
  return { kept: lines.slice(0, maxLines), omitted };
}

/** `… 55 more nodes left out (maxNodes 3): 40 link, 12 StaticText, 3 button; ...`, most first. */
export function omittedLine(omitted: Readonly<Record<string, number>>, maxNodes: number): string | undefined {
  const entries = Object.entries(omitted).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  if (entries.length === 0) return undefined;
  const total = entries.reduce((sum, [, n]) => sum + n, 0);
  const counts = entries.map(([role, n]) => `${String(n)} ${role}`).join(", ");
  return `… ${String(total)} more nodes left out (maxNodes ${String(maxNodes)}): ${counts}; use interactiveOnly or raise maxNodes`;
}

/** A line's identity across two snapshots of one document: its ref, or its text and occurrence. */
export function lineKeys(lines: readonly Line[]): Map<string, string> {
  const keys = new Map<string, string>();
  const seen = new Map<string, number>();
  for (const line of lines) {
    if (line.ref !== undefined) {
      keys.set(`r:${line.ref}`, line.text);
      continue;
    }
    const n = (seen.get(line.text) ?? 0) + 1;
    seen.set(line.text, n);
    keys.set(`t:${String(n)}:${line.text}`, line.text);
  }
  return keys;
}

export interface LineDiff {
  readonly lines: string[];
  readonly added: number;
  readonly changed: number;
  readonly removed: number;
  readonly removedRefs: string[];
}

/** What changed from `before` to `after`: `+` new, `~` changed (same ref), `-` gone. */
export function diffLines(before: ReadonlyMap<string, string>, after: readonly Line[]): LineDiff {
  const now = lineKeys(after);
  const lines: string[] = [];
  let added = 0;
  let changed = 0;
  for (const [key, text] of now) {
    const old = before.get(key);
    if (old === undefined) {
      lines.push(`+ ${text}`);
      added += 1;
    } else if (old !== text) {
      lines.push(`~ ${text}`);
      changed += 1;
    }
  }
  const removedRefs: string[] = [];
  for (const [key, text] of before) {
    if (now.has(key)) continue;
    lines.push(`- ${text}`);
    if (key.startsWith("r:")) removedRefs.push(key.slice(2));
  }
  return { lines, added, changed, removed: lines.length - added - changed, removedRefs };
}
