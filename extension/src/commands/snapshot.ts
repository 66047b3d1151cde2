/**
 * `snapshot`: the accessibility tree of the main frame (Accessibility.getFullAXTree), as structured
 * nodes for programs, as compact text for a model's context (snapshotText.ts), or both. Refs are of
 * the current generation. Values of password fields are never reported. Images, SVG and canvases
 * are probed for what identifies them and whether the page listens to clicks on them, since their
 * accessibility node alone cannot tell two unlabeled ones apart.
 * While the tab shows Chromium's block page for a stopped navigation, the snapshot says so and
 * mints no refs into the error page.
 */
import { SNAPSHOT_DEFAULT_MAX_NODES } from "../constants";
import { CommandError, StaleAuthorityError } from "../errors";
import type { SnapshotChanges, SnapshotCommand, SnapshotNode, SnapshotResult } from "@understudy/protocol";
import { type CommandContext, remainingMs } from "./context";
import type { Remembered } from "./snapshotMemory";
import { boundLines, compactLines, diffLines, lineKeys, omittedLine, renderLine } from "./snapshotText";
import type { AXNode, PageNode } from "./snapshotTree";
import { GRAPHIC_ROLES, TEXT_ENTRY_ROLES, UNREFERABLE_ROLES, buildTree, walk } from "./snapshotTree";

const SNAPSHOT_MAX_NODES_LIMIT = 5_000;
const SNAPSHOT_FORMATS: ReadonlySet<string> = new Set<NonNullable<SnapshotCommand["format"]>>(["nodes", "compact", "both"]);
/** Graphics probed per snapshot (three CDP calls each); a gallery past this keeps its roles and names. */
const MAX_GRAPHIC_PROBES = 200;
const PROBE_OBJECT_GROUP = "understudy-snapshot";
/** Events that make an element clickable to a user; `DOMDebugger.getEventListeners` reports them. */
const CLICK_EVENTS: ReadonlySet<string> = new Set(["click", "mousedown", "mouseup", "pointerdown", "pointerup", "touchstart", "touchend", "dblclick"]);

/**
 * Runs on the element (Runtime.callFunctionOn): its tag, the attributes that identify it and
 * whether it shows a pointer cursor. Bounded: at most 8 attributes of 200 characters.
 */
const IDENTIFY_FUNCTION = `function () {
  const out = {};
  const keep = (key, value) => {
    if (typeof value === "string" && value !== "" && Object.keys(out).length < 8) out[key] = value.slice(0, 200);
  };
  keep("id", this.id);
  keep("title", this.getAttribute("title"));
  for (const attribute of Array.from(this.attributes)) {
    if (attribute.name.startsWith("aria-") && attribute.name !== "aria-hidden") keep(attribute.name, attribute.value);
  }
  const tag = this.tagName.toLowerCase();
  if (tag === "img") keep("src", (this.getAttribute("src") || "").split(/[?#]/)[0].split("/").pop());
  return { tag, attributes: out, pointer: getComputedStyle(this).cursor === "pointer" };
}`;

interface Identity {
  readonly tag?: string;
  readonly attributes: Record<string, string>;
  readonly pointer: boolean;
}

const ATTRIBUTE_ORDER: readonly string[] = ["id", "title", "src"];

function attributeRank(name: string): number {
  const rank = ATTRIBUTE_ORDER.indexOf(name);
  return rank === -1 ? ATTRIBUTE_ORDER.length : rank;
}

function parseIdentity(value: unknown): Identity | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const v = value as { tag?: unknown; attributes?: unknown; pointer?: unknown };
  const attributes: Record<string, string> = {};
  if (typeof v.attributes === "object" && v.attributes !== null) {
    // A fixed order (the page's is lost on the way back from the page), so two snapshots of one
    // element read alike: id, title, src, then aria-* by name.
    const entries = Object.entries(v.attributes as Record<string, unknown>).sort(([a], [b]) => attributeRank(a) - attributeRank(b) || a.localeCompare(b));
    for (const [key, raw] of entries) {
      if (typeof raw === "string") attributes[key] = raw.slice(0, 200);
    }
  }
  return { ...(typeof v.tag === "string" ? { tag: v.tag } : {}), attributes, pointer: v.pointer === true };
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

/** Marks a graphic clickable and attaches what identifies it; a failed probe leaves it as it was. */
async function probeGraphic(ctx: CommandContext, node: PageNode, backendNodeId: number): Promise<void> {
  try {
    const resolved = await ctx.cdp.send<{ object?: { objectId?: string } }>("DOM.resolveNode", { backendNodeId, objectGroup: PROBE_OBJECT_GROUP });
    const objectId = resolved.object?.objectId;
    if (objectId === undefined) return;
    const [identified, listened] = await Promise.all([
      ctx.cdp.send<{ result?: { value?: unknown } }>("Runtime.callFunctionOn", { objectId, functionDeclaration: IDENTIFY_FUNCTION, returnByValue: true }),
      ctx.cdp.send<{ listeners?: readonly { type?: unknown }[] }>("DOMDebugger.getEventListeners", { objectId }),
    ]);
    const identity = parseIdentity(identified.result?.value);
    const clickable = identity?.pointer === true || (listened.listeners ?? []).some((l) => typeof l.type === "string" && CLICK_EVENTS.has(l.type));
    if (identity?.tag !== undefined) node.tag = identity.tag;
    if (clickable) node.clickable = true;
    const attributes = identity?.attributes ?? {};
    if ((clickable || node.name.text.trim() === "") && Object.keys(attributes).length > 0) node.attributes = attributes;
  } catch (error) {
    if (error instanceof StaleAuthorityError) throw error;
    // The element went away while we looked: the snapshot still lists it by role and name.
  }
}

/** Finds password fields and probes graphics, all at once. */
async function enrich(ctx: CommandContext, root: PageNode): Promise<void> {
  const work: Promise<void>[] = [];
  let probes = 0;
  for (const { node } of walk(root)) {
    const id = node.backendNodeId;
    if (TEXT_ENTRY_ROLES.has(node.role)) {
      if (id === undefined) node.secret = node.value !== undefined;
      else work.push(isPasswordField(ctx, id).then((secret) => {
        if (secret) node.secret = true;
      }));
    } else if (GRAPHIC_ROLES.has(node.role) && id !== undefined && probes < MAX_GRAPHIC_PROBES) {
      probes += 1;
      work.push(probeGraphic(ctx, node, id));
    }
  }
  try {
    await Promise.all(work);
  } finally {
    if (probes > 0) {
      await ctx.cdp.send("Runtime.releaseObjectGroup", { objectGroup: PROBE_OBJECT_GROUP }).catch((error: unknown) => {
        if (error instanceof StaleAuthorityError) throw error;
      });
    }
  }
}

/** The longest a snapshot waits for its generation to be recorded before handing out refs. */
const RECORD_WAIT_MAX_MS = 2_000;

/** A navigation during a snapshot retires its refs; it is retried this many times. */
const SNAPSHOT_ATTEMPTS = 3;

export async function snapshot(ctx: CommandContext, command: SnapshotCommand): Promise<SnapshotResult> {
  const blocked = ctx.blockedPage();
  if (blocked !== undefined) {
    const tab = await ctx.tab();
    const result: SnapshotResult = { name: "snapshot", url: tab.url, title: tab.title, generation: ctx.refs.generation, nodes: [], truncated: false, blockedNavigation: blocked };
    // A model reading the compact form gets the fact as its one line instead of an empty page.
    if ((command.format ?? "nodes") === "nodes") return result;
    return { ...result, text: `The tab shows Chromium's block page: a ${blocked.kind} to ${blocked.origin} was stopped (${blocked.cause}); navigate to an allowed URL or go back.` };
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

/**
 * The page as the header names it: `title — url`, or the URL alone when the title says no more
 * (a document without a title, whose tab title Chromium makes from the URL).
 */
export function pageLabel(title: string, url: string): string {
  const bare = url.replace(/^[a-z][a-z0-9+.-]*:\/\//i, "");
  const t = title.trim();
  const repeatsUrl = t === "" || t === url || t === bare || t === bare.replace(/\/$/, "");
  return repeatsUrl ? url : `${t} — ${url}`;
}

function isActionable(node: PageNode): boolean {
  return node.interactive || node.clickable === true;
}

/** The structured node of a page node (the wire shape). */
function wireNode(node: PageNode, depth: number): SnapshotNode {
  const entry: { -readonly [K in keyof SnapshotNode]: SnapshotNode[K] } = { role: node.role, name: node.name.text, depth };
  if (node.name.fullLength !== undefined) entry.nameLength = node.name.fullLength;
  if (node.ref !== undefined) entry.ref = node.ref;
  if (node.value !== undefined && node.secret !== true) {
    entry.value = node.value.text;
    if (node.value.fullLength !== undefined) entry.valueLength = node.value.fullLength;
  }
  if (typeof node.checked === "boolean") entry.checked = node.checked;
  if (node.disabled === true) entry.disabled = true;
  if (node.focused === true) entry.focused = true;
  if (node.multiline !== undefined) entry.multiline = node.multiline;
  if (node.clickable === true) entry.clickable = true;
  if (node.attributes !== undefined) entry.attributes = node.attributes;
  return entry;
}

/** A node's identity across two snapshots of one document: its ref, or its role, name and occurrence. */
function nodeKeys(nodes: readonly SnapshotNode[]): Map<string, string> {
  const keys = new Map<string, string>();
  const seen = new Map<string, number>();
  for (const node of nodes) {
    // Depth is left out: a node that only moved under a new wrapper did not change for a user.
    const body = JSON.stringify({ ...node, depth: 0 });
    if (node.ref !== undefined) {
      keys.set(`r:${node.ref}`, body);
      continue;
    }
    const base = `${node.role}:${node.name}`;
    const n = (seen.get(base) ?? 0) + 1;
    seen.set(base, n);
    keys.set(`t:${String(n)}:${base}`, body);
  }
  return keys;
}

interface NodesPart {
  readonly nodes: SnapshotNode[];
  readonly truncated: boolean;
  readonly omitted: Record<string, number>;
}

function structuredNodes(root: PageNode, interactiveOnly: boolean, maxNodes: number): NodesPart {
  const nodes: SnapshotNode[] = [];
  const omitted: Record<string, number> = {};
  for (const { node, depth } of walk(root)) {
    if (interactiveOnly && !isActionable(node)) continue;
    if (nodes.length >= maxNodes) {
      omitted[node.role] = (omitted[node.role] ?? 0) + 1;
      continue;
    }
    nodes.push(wireNode(node, depth));
  }
  return { nodes, truncated: Object.keys(omitted).length > 0, omitted };
}

async function buildSnapshot(
  ctx: CommandContext,
  command: SnapshotCommand,
  axNodes: readonly AXNode[],
  generation: number,
): Promise<SnapshotResult | undefined> {
  const format = command.format ?? "nodes";
  if (!SNAPSHOT_FORMATS.has(format)) {
    throw new CommandError("invalid_arguments", `snapshot format ${JSON.stringify(String(format)).slice(0, 40)} is not one of nodes, compact, both.`);
  }
  const wantsNodes = format === "nodes" || format === "both";
  const wantsText = format === "compact" || format === "both";
  const interactiveOnly = command.interactiveOnly === true;
  const maxNodes = Math.max(1, Math.min(command.maxNodes ?? SNAPSHOT_DEFAULT_MAX_NODES, SNAPSHOT_MAX_NODES_LIMIT));
  const root = buildTree(axNodes);
  if (root !== undefined) await enrich(ctx, root);
  // Refs leave only once their generation is recorded, so a restarted runtime never reissues it
  // (refTable.ts); storage answers in milliseconds, and a storage that hangs does not hang this.
  await Promise.race([ctx.refs.whenRecorded(), ctx.sleep(remainingMs(ctx, RECORD_WAIT_MAX_MS))]);
  if (ctx.refs.generation !== generation) return undefined;

  // Structured nodes name every element; the compact text only what a user can act on, so its
  // refs stay few and short.
  if (root !== undefined) {
    for (const { node } of walk(root)) {
      if (node.backendNodeId === undefined || UNREFERABLE_ROLES.has(node.role)) continue;
      if (!wantsNodes && !isActionable(node) && !GRAPHIC_ROLES.has(node.role)) continue;
      node.ref = ctx.refs.mint({ backendNodeId: node.backendNodeId, role: node.role, name: node.name.text });
    }
  }
  const part: NodesPart = root === undefined || !wantsNodes ? { nodes: [], truncated: false, omitted: {} } : structuredNodes(root, interactiveOnly, maxNodes);
  const allLines = root === undefined || !wantsText ? [] : compactLines(root, interactiveOnly);
  const bounded = boundLines(allLines, maxNodes);

  const tab = await ctx.tab();
  if (ctx.refs.generation !== generation) return undefined;
  const snapshotId = ctx.snapshots.nextId(generation);
  const remembered: Remembered = {
    id: snapshotId,
    generation,
    ...(wantsText ? { lines: lineKeys(bounded.kept) } : {}),
    ...(wantsNodes ? { nodes: nodeKeys(part.nodes) } : {}),
  };
  const recall = command.changesSince === undefined ? undefined : ctx.snapshots.recall(command.changesSince, generation);
  ctx.snapshots.remember(remembered);

  const omitted = wantsNodes ? part.omitted : bounded.omitted;
  const truncated = wantsNodes ? part.truncated : Object.keys(bounded.omitted).length > 0;
  const result: { -readonly [K in keyof SnapshotResult]: SnapshotResult[K] } = {
    name: "snapshot", url: tab.url, title: tab.title, generation, snapshotId, nodes: part.nodes, truncated,
  };
  if (truncated) result.omitted = omitted;
  // One header line: what page, and the id to pass as changesSince. How to read refs and the id
  // is the caller's to say once (the MCP tool's description), not every snapshot's.
  const header = (note: string): string => `# ${pageLabel(tab.title, tab.url)} (${snapshotId}${note})`;

  if (recall?.status === "compared" && (!wantsText || recall.base.lines !== undefined) && (!wantsNodes || recall.base.nodes !== undefined)) {
    const since = command.changesSince ?? "";
    const changes: { -readonly [K in keyof SnapshotChanges]: SnapshotChanges[K] } = { since, status: "compared" };
    if (wantsNodes && recall.base.nodes !== undefined) {
      const before = recall.base.nodes;
      const now = nodeKeys(part.nodes);
      const keys = [...now.keys()];
      result.nodes = part.nodes.filter((_, i) => {
        const key = keys[i];
        return key !== undefined && before.get(key) !== now.get(key);
      });
      const removedRefs = [...before.keys()].filter((k) => !now.has(k) && k.startsWith("r:")).map((k) => k.slice(2));
      changes.added = keys.filter((k) => !before.has(k)).length;
      changes.changed = result.nodes.length - changes.added;
      changes.removed = [...before.keys()].filter((k) => !now.has(k)).length;
      changes.removedRefs = removedRefs;
    }
    if (wantsText && recall.base.lines !== undefined) {
      const diff = diffLines(recall.base.lines, bounded.kept);
      changes.added = diff.added;
      changes.changed = diff.changed;
      changes.removed = diff.removed;
      changes.removedRefs = diff.removedRefs;
      const counts = `+${String(diff.added)} ~${String(diff.changed)} -${String(diff.removed)}`;
      const body = diff.lines.length === 0 ? ["(nothing changed)"] : diff.lines;
      result.text = [header(`: changes since ${since}, ${counts}; its refs still hold`), ...body].join("\n");
    }
    result.changes = changes;
    return result;
  }
  if (command.changesSince !== undefined) {
    result.changes = { since: command.changesSince, status: recall?.status === "navigated" ? "navigated" : "unavailable" };
  }
  if (wantsText) {
    const since = command.changesSince ?? "";
    const why =
      result.changes === undefined ? "" : result.changes.status === "navigated" ? `; the page navigated since ${since}: full snapshot` : `; ${since} is not the latest snapshot: full snapshot`;
    const lines = [header(why), ...bounded.kept.map(renderLine)];
    const left = omittedLine(bounded.omitted, maxNodes);
    if (left !== undefined) lines.push(left);
    result.text = lines.join("\n");
  }
  return result;
}
