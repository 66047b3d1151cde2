/**
 * The page as a tree of accessibility nodes, read from `Accessibility.getFullAXTree` and made
 * ready for both snapshot forms: ignored nodes and inline text boxes are gone (their children
 * move up), texts are cut at a bound with their full length kept, and each node says whether a
 * user acts on it. Pure data: the CDP reads that enrich it live in snapshot.ts.
 */

interface AXValue {
  readonly value?: unknown;
}

export interface AXNode {
  readonly nodeId: string;
  readonly ignored?: boolean;
  readonly role?: AXValue;
  readonly name?: AXValue;
  readonly value?: AXValue;
  readonly properties?: readonly { readonly name: string; readonly value: AXValue }[];
  readonly childIds?: readonly string[];
  readonly parentId?: string;
  readonly backendDOMNodeId?: number;
}

export const MAX_ROLE_CHARS = 64;
/** Names and values longer than this are cut; the node keeps the full length (spec: maxLength 1000). */
export const MAX_TEXT_CHARS = 1000;

/** Roles a user acts on; `interactiveOnly` keeps these and anything focusable. */
export const INTERACTIVE_ROLES: ReadonlySet<string> = new Set([
  "button", "checkbox", "combobox", "ComboBoxSelect", "link", "listbox", "menuitem", "menuitemcheckbox",
  "menuitemradio", "option", "radio", "searchbox", "slider", "spinbutton", "switch", "tab", "textbox", "treeitem",
]);

/** Roles Chromium gives images, SVG roots and canvases: they get identifying attributes and a click probe. */
export const GRAPHIC_ROLES: ReadonlySet<string> = new Set([
  "image", "img", "Canvas", "graphics-document", "graphics-object", "graphics-symbol", "SvgRoot",
]);

/** Roles that never get a ref: the document itself and text fragments. */
export const UNREFERABLE_ROLES: ReadonlySet<string> = new Set(["RootWebArea", "StaticText", "InlineTextBox", "LineBreak"]);

/** Roles whose value may be a typed secret. */
export const TEXT_ENTRY_ROLES: ReadonlySet<string> = new Set(["textbox", "searchbox"]);

/** A text cut at a bound: what is kept, and the full length when something was cut. */
export interface CutText {
  readonly text: string;
  readonly fullLength?: number;
}

export type Checked = boolean | "mixed";

export interface PageNode {
  readonly role: string;
  readonly name: CutText;
  readonly value?: CutText;
  readonly backendNodeId?: number;
  /** A user acts on it (a control role or focusable). */
  readonly interactive: boolean;
  readonly checked?: Checked;
  readonly disabled?: boolean;
  readonly focused?: boolean;
  readonly expanded?: boolean;
  readonly selected?: boolean;
  readonly required?: boolean;
  readonly readonly?: boolean;
  readonly level?: number;
  /** Text entry: multi-line (textarea, rich-text editor) or single-line. */
  readonly multiline?: boolean;
  /** A rich-text editing host (contenteditable): a text entry whatever its role. */
  readonly richText?: boolean;
  readonly children: PageNode[];
  // Filled in by snapshot.ts after the tree is built.
  ref?: string;
  /** The value is a password's and is never reported. */
  secret?: boolean;
  /** An image, SVG or canvas the page listens to clicks on. */
  clickable?: boolean;
  /** The element's tag when it is a graphic (`img`, `svg`, `canvas`). */
  tag?: string;
  attributes?: Record<string, string>;
}

export function cut(raw: string, max: number = MAX_TEXT_CHARS): CutText {
  return raw.length > max ? { text: raw.slice(0, max), fullLength: raw.length } : { text: raw };
}

function text(value: AXValue | undefined): string {
  const raw = value?.value;
  if (typeof raw === "string") return raw;
  if (typeof raw === "number" || typeof raw === "boolean") return String(raw);
  return "";
}

function property(node: AXNode, name: string): unknown {
  return node.properties?.find((p) => p.name === name)?.value.value;
}

function checkedOf(node: AXNode): Checked | undefined {
  const checked = property(node, "checked");
  if (checked === "true" || checked === true) return true;
  if (checked === "false" || checked === false) return false;
  if (checked === "mixed") return "mixed";
  return undefined;
}

function toPageNode(node: AXNode, parent: AXNode | undefined): Omit<PageNode, "children"> {
  const role = text(node.role).slice(0, MAX_ROLE_CHARS);
  // The editing host carries `editable`; its descendants inherit it, so only a host whose parent is
  // not editable is the editor itself.
  const richText = property(node, "editable") === "richtext" && (parent === undefined || property(parent, "editable") !== "richtext");
  const textEntry = TEXT_ENTRY_ROLES.has(role) || richText;
  const multilineProperty = property(node, "multiline");
  const level = property(node, "level");
  const expanded = property(node, "expanded");
  const valueText = text(node.value);
  const page: { -readonly [K in keyof Omit<PageNode, "children">]: Omit<PageNode, "children">[K] } = {
    role,
    name: cut(text(node.name)),
    interactive: INTERACTIVE_ROLES.has(role) || property(node, "focusable") === true || richText,
  };
  if (valueText !== "") page.value = cut(valueText);
  if (node.backendDOMNodeId !== undefined) page.backendNodeId = node.backendDOMNodeId;
  const checked = checkedOf(node);
  if (checked !== undefined) page.checked = checked;
  if (property(node, "disabled") === true) page.disabled = true;
  if (property(node, "focused") === true) page.focused = true;
  if (typeof expanded === "boolean") page.expanded = expanded;
  if (property(node, "selected") === true) page.selected = true;
  if (property(node, "required") === true) page.required = true;
  if (property(node, "readonly") === true) page.readonly = true;
  if (typeof level === "number") page.level = level;
  if (richText) page.richText = true;
  // A textarea says multiline: true, an input false; a rich-text editor takes Enter as a new line
  // unless it says otherwise (aria-multiline=false).
  if (textEntry) page.multiline = richText ? multilineProperty !== false : multilineProperty === true;
  return page;
}

/**
 * The tree from the root, in document order. Ignored nodes and inline text boxes are left out and
 * their children take their place, so the depth of a node counts only nodes that are kept.
 */
export function buildTree(nodes: readonly AXNode[]): PageNode | undefined {
  const byId = new Map(nodes.map((n) => [n.nodeId, n]));
  const root = nodes.find((n) => n.parentId === undefined || !byId.has(n.parentId));
  if (root === undefined) return undefined;
  const seen = new Set<string>();
  // Iterative, so a deep page cannot overflow the stack.
  const made: PageNode = { ...toPageNode(root, undefined), children: [] };
  seen.add(root.nodeId);
  const stack: { ax: AXNode; into: PageNode; parentAx: AXNode }[] = [];
  const pushChildren = (ax: AXNode, into: PageNode): void => {
    const children = (ax.childIds ?? []).map((id) => byId.get(id)).filter((c): c is AXNode => c !== undefined);
    for (let i = children.length - 1; i >= 0; i -= 1) {
      const child = children[i];
      if (child !== undefined) stack.push({ ax: child, into, parentAx: ax });
    }
  };
  pushChildren(root, made);
  while (stack.length > 0) {
    const item = stack.pop();
    if (item === undefined || seen.has(item.ax.nodeId)) continue;
    seen.add(item.ax.nodeId);
    const role = text(item.ax.role);
    if (item.ax.ignored === true || role === "InlineTextBox") {
      pushChildren(item.ax, item.into);
      continue;
    }
    const page: PageNode = { ...toPageNode(item.ax, item.parentAx), children: [] };
    item.into.children.push(page);
    pushChildren(item.ax, page);
  }
  return made;
}

/** Every node with its depth, depth-first in document order. */
export function walk(root: PageNode): { node: PageNode; depth: number }[] {
  const out: { node: PageNode; depth: number }[] = [];
  const stack: { node: PageNode; depth: number }[] = [{ node: root, depth: 0 }];
  while (stack.length > 0) {
    const item = stack.pop();
    if (item === undefined) continue;
    out.push(item);
    for (let i = item.node.children.length - 1; i >= 0; i -= 1) {
      const child = item.node.children[i];
      if (child !== undefined) stack.push({ node: child, depth: item.depth + 1 });
    }
  }
  return out;
}
