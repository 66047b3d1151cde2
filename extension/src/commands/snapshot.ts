/**
 * `snapshot`: the accessibility tree of the main frame (Accessibility.getFullAXTree), in document
 * order with depths, bounded by `maxNodes`. Every element node gets a ref of the current
 * generation. Values of password fields are never reported. While the tab shows Chromium's block
 * page for a stopped navigation, the snapshot says so and mints no refs into the error page.
 */
import { SNAPSHOT_DEFAULT_MAX_NODES } from "../constants";
import { CommandError, StaleAuthorityError } from "../errors";
import type { SnapshotCommand, SnapshotNode, SnapshotResult } from "../generated/wire";
import type { CommandContext } from "./context";

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

const MAX_ROLE = 64;
const MAX_TEXT = 1000;
const SNAPSHOT_MAX_NODES_LIMIT = 5_000;

/** Roles a user acts on; `interactiveOnly` keeps these and anything focusable. */
const INTERACTIVE_ROLES: ReadonlySet<string> = new Set([
  "button", "checkbox", "combobox", "ComboBoxSelect", "link", "listbox", "menuitem", "menuitemcheckbox",
  "menuitemradio", "option", "radio", "searchbox", "slider", "spinbutton", "switch", "tab", "textbox", "treeitem",
]);

/** Roles that never get a ref: the document itself and text fragments. */
const UNREFERABLE_ROLES: ReadonlySet<string> = new Set(["RootWebArea", "StaticText", "InlineTextBox", "LineBreak"]);

/** Roles whose value may be a typed secret. */
const TEXT_ENTRY_ROLES: ReadonlySet<string> = new Set(["textbox", "searchbox"]);

function text(value: AXValue | undefined, max: number): string {
  const raw = value?.value;
  if (typeof raw === "string") return raw.slice(0, max);
  if (typeof raw === "number" || typeof raw === "boolean") return String(raw);
  return "";
}

function property(node: AXNode, name: string): unknown {
  return node.properties?.find((p) => p.name === name)?.value.value;
}

function isInteractive(node: AXNode, role: string): boolean {
  return INTERACTIVE_ROLES.has(role) || property(node, "focusable") === true;
}

async function isPasswordField(ctx: CommandContext, backendNodeId: number): Promise<boolean> {
  try {
    const described = await ctx.cdp.send<{ node?: { attributes?: string[] } }>("DOM.describeNode", { backendNodeId });
    const attributes = described.node?.attributes ?? [];
    for (let i = 0; i + 1 < attributes.length; i += 2) {
      if (attributes[i]?.toLowerCase() === "type" && attributes[i + 1]?.toLowerCase() === "password") return true;
    }
    return false;
  } catch (error) {
    if (error instanceof StaleAuthorityError) throw error;
    // Unknown means we cannot prove it is not a password: withhold the value.
    return true;
  }
}

/** Orders the tree depth-first from the root, skipping ignored nodes but keeping their children. */
export function flatten(nodes: readonly AXNode[]): { node: AXNode; depth: number }[] {
  const byId = new Map(nodes.map((n) => [n.nodeId, n]));
  const root = nodes.find((n) => n.parentId === undefined || !byId.has(n.parentId));
  const ordered: { node: AXNode; depth: number }[] = [];
  if (root === undefined) return ordered;
  const stack: { node: AXNode; depth: number }[] = [{ node: root, depth: 0 }];
  const seen = new Set<string>();
  while (stack.length > 0) {
    const item = stack.pop();
    if (item === undefined || seen.has(item.node.nodeId)) continue;
    seen.add(item.node.nodeId);
    const childDepth = item.node.ignored === true ? item.depth : item.depth + 1;
    if (item.node.ignored !== true) ordered.push(item);
    const children = (item.node.childIds ?? []).map((id) => byId.get(id)).filter((c): c is AXNode => c !== undefined);
    for (let i = children.length - 1; i >= 0; i -= 1) {
      const child = children[i];
      if (child !== undefined) stack.push({ node: child, depth: childDepth });
    }
  }
  return ordered;
}

/** A navigation during a snapshot retires its refs; it is retried this many times. */
const SNAPSHOT_ATTEMPTS = 3;

export async function snapshot(ctx: CommandContext, command: SnapshotCommand): Promise<SnapshotResult> {
  const blocked = ctx.blockedPage();
  if (blocked !== undefined) {
    const tab = await ctx.tab();
    return { name: "snapshot", url: tab.url, title: tab.title, generation: ctx.refs.generation, nodes: [], truncated: false, blockedNavigation: blocked };
  }
  for (let attempt = 0; attempt < SNAPSHOT_ATTEMPTS; attempt += 1) {
    const generation = ctx.refs.generation;
    const { nodes } = await ctx.cdp.send<{ nodes: AXNode[] }>("Accessibility.getFullAXTree", {});
    // Nodes read from one document must not be minted into the next document's generation.
    if (ctx.refs.generation !== generation) continue;
    const result = await buildSnapshot(ctx, command, nodes, generation);
    if (result !== undefined) return result;
  }
  throw new CommandError("navigation_failed", "The page kept navigating during the snapshot; wait for it to settle (wait_for), then take a snapshot.");
}

async function buildSnapshot(
  ctx: CommandContext,
  command: SnapshotCommand,
  nodes: readonly AXNode[],
  generation: number,
): Promise<SnapshotResult | undefined> {
  const maxNodes = Math.max(1, Math.min(command.maxNodes ?? SNAPSHOT_DEFAULT_MAX_NODES, SNAPSHOT_MAX_NODES_LIMIT));
  const result: SnapshotNode[] = [];
  let truncated = false;
  for (const { node, depth } of flatten(nodes)) {
    const role = text(node.role, MAX_ROLE);
    if (role === "InlineTextBox") continue;
    if (command.interactiveOnly === true && !isInteractive(node, role)) continue;
    if (result.length >= maxNodes) {
      truncated = true;
      break;
    }
    const entry: { -readonly [K in keyof SnapshotNode]: SnapshotNode[K] } = { role, name: text(node.name, MAX_TEXT), depth };
    const backendNodeId = node.backendDOMNodeId;
    if (ctx.refs.generation !== generation) return undefined;
    if (backendNodeId !== undefined && !UNREFERABLE_ROLES.has(role)) {
      entry.ref = ctx.refs.mint({ backendNodeId, role, name: entry.name });
    }
    const value = text(node.value, MAX_TEXT);
    if (value !== "") {
      const secret = TEXT_ENTRY_ROLES.has(role) && (backendNodeId === undefined || (await isPasswordField(ctx, backendNodeId)));
      if (!secret) entry.value = value;
    }
    const checked = property(node, "checked");
    if (checked === "true" || checked === true) entry.checked = true;
    else if (checked === "false" || checked === false) entry.checked = false;
    if (property(node, "disabled") === true) entry.disabled = true;
    if (property(node, "focused") === true) entry.focused = true;
    result.push(entry);
  }
  const tab = await ctx.tab();
  if (ctx.refs.generation !== generation) return undefined;
  return { name: "snapshot", url: tab.url, title: tab.title, generation, nodes: result, truncated };
}
