import { describe, expect, it } from "vitest";

import { pageLabel } from "../../src/commands/snapshot";
import { boundLines, compactLines, diffLines, lineKeys, omittedLine, renderLine } from "../../src/commands/snapshotText";
import type { AXNode, PageNode } from "../../src/commands/snapshotTree";
import { buildTree, walk } from "../../src/commands/snapshotTree";
import type { FakeSocket } from "../fakes/fakeSocket";
import { LEASE_A, connectDevice, enroll, makeHarness, provision, settle } from "../fakes/harness";
import { installLoginPage, read } from "../fakes/page";

/** A compact AX node: `[role, name, props?, children?]`, numbered in document order. */
type Spec = readonly [string, string, Record<string, unknown>?, (readonly Spec[])?];

function axTree(spec: Spec): AXNode[] {
  const nodes: AXNode[] = [];
  let next = 1;
  const add = (s: Spec, parentId: string | undefined): string => {
    const id = String(next);
    next += 1;
    const [role, name, props = {}, children = []] = s;
    const { value, ignored, ...properties } = props;
    const node: AXNode & { childIds: string[] } = {
      nodeId: id,
      role: { value: role },
      name: { value: name },
      backendDOMNodeId: 100 + Number(id),
      childIds: [],
      ...(parentId === undefined ? {} : { parentId }),
      ...(value === undefined ? {} : { value: { value } }),
      ...(ignored === true ? { ignored: true } : {}),
      properties: Object.entries(properties).map(([k, v]) => ({ name: k, value: { value: v } })),
    };
    nodes.push(node);
    for (const child of children) node.childIds.push(add(child, id));
    return id;
  };
  add(spec, undefined);
  return nodes;
}

/** The tree with a ref on every node a user acts on, as snapshot.ts mints them. */
function page(spec: Spec): PageNode {
  const root = buildTree(axTree(spec));
  if (root === undefined) throw new Error("no root");
  let n = 1;
  for (const { node } of walk(root)) {
    if (node.interactive && node.role !== "RootWebArea") {
      node.ref = `g7e${String(n)}`;
      n += 1;
    }
  }
  return root;
}

function text(spec: Spec, interactiveOnly = false): string {
  return compactLines(page(spec), interactiveOnly).map(renderLine).join("\n");
}

describe("the compact snapshot", () => {
  it("leaves out empty wrappers and writes links inside their text, refs in brackets", () => {
    const out = text(["RootWebArea", "Docs", {}, [
      ["generic", "", {}, [["generic", "", {}, [
        ["paragraph", "", {}, [
          ["StaticText", "Read the "],
          ["link", "terms", { focusable: true }, [["StaticText", "terms"]]],
          ["StaticText", " first."],
        ]],
      ]]]],
      ["separator", ""],
      ["navigation", "Site", {}, [["list", "", {}, [["listitem", "", {}, [["ListMarker", "•"], ["link", "Home", { focusable: true }]]]]]]],
      ["button", "Go", { focusable: true }, [["StaticText", "Go"]]],
    ]]);
    expect(out).toBe(["Read the [terms](g7e1) first.", 'navigation "Site"', " [Home](g7e2)", 'button "Go" [g7e3]'].join("\n"));
    expect(out).not.toMatch(/generic|paragraph|listitem|null|undefined|•/);
  });

  it("tells a textarea and a rich-text editor from a single-line input", () => {
    const out = text(["RootWebArea", "", {}, [
      ["textbox", "Notes", { multiline: true, focusable: true, value: "a\nb" }],
      ["textbox", "Title", { multiline: false, focusable: true, value: "short" }],
      ["generic", "Editor", { editable: "richtext", focusable: true }, [["StaticText", "rich", { editable: "richtext" }]]],
    ]]);
    expect(out.split("\n")).toEqual([
      'textbox "Notes" ="a\\nb" multiline [g7e1]',
      'textbox "Title" ="short" [g7e2]',
      'editor "Editor" multiline [g7e3]',
      " rich",
    ]);
  });

  it("marks a cut value with its full length", () => {
    const long = "x".repeat(1398);
    const root = page(["RootWebArea", "", {}, [["textbox", "Bio", { focusable: true, value: long, multiline: true }]]]);
    const textbox = root.children[0];
    expect(textbox?.value).toEqual({ text: "x".repeat(1000), fullLength: 1398 });
    const [line] = compactLines(root, false);
    expect(line?.text).toContain(`="${"x".repeat(1000)}"…[cut: 1398 chars]`);
  });

  it("never writes a password's value, and says the field is one", () => {
    const root = page(["RootWebArea", "", {}, [["textbox", "Password", { focusable: true, value: "hunter2" }]]]);
    const field = root.children[0];
    if (field === undefined) throw new Error("no field");
    field.secret = true;
    const out = compactLines(root, false).map(renderLine).join("\n");
    expect(out).toBe('textbox "Password" password [g7e1]');
    expect(out).not.toContain("hunter2");
  });

  it("drops a label that repeats the name of its field, and keeps other text", () => {
    const out = text(["RootWebArea", "", {}, [
      ["LabelText", "", {}, [["StaticText", "Email: "], ["textbox", "Email", { focusable: true }]]],
      ["StaticText", "We never share it."],
    ]]);
    expect(out).toBe('textbox "Email" [g7e1]\nWe never share it.');
  });

  it("writes unnamed graphics with what identifies them, and clickable ones as such", () => {
    const root = page(["RootWebArea", "", {}, [["image", ""], ["Canvas", ""], ["image", "Logo"]]]);
    const [svg, canvas] = root.children;
    if (svg === undefined || canvas === undefined) throw new Error("no graphics");
    Object.assign(svg, { tag: "svg", clickable: true, ref: "g7e8", attributes: { id: "star", "aria-describedby": "tip" } });
    Object.assign(canvas, { tag: "canvas", clickable: true, ref: "g7e9", attributes: { id: "board" } });
    expect(compactLines(root, false).map(renderLine)).toEqual([
      "svg clickable id=star aria-describedby=tip [g7e8]",
      "canvas clickable id=board [g7e9]",
      'img "Logo"',
    ]);
  });

  it("keeps only what a user acts on in interactive-only mode, links too", () => {
    const out = text(["RootWebArea", "", {}, [
      ["heading", "Title", { level: 1 }, [["StaticText", "Title"]]],
      ["paragraph", "", {}, [["StaticText", "See "], ["link", "help", { focusable: true }]]],
      ["main", "", {}, [["checkbox", "Agree", { focusable: true, checked: "false" }]]],
    ]], true);
    expect(out).toBe('[help](g7e1)\ncheckbox "Agree" [g7e2]');
  });

  it("does not repeat under a named node the text its name already says", () => {
    const out = text(["RootWebArea", "", {}, [
      ["heading", "Bootstrap Cheatsheet", { level: 1 }, [["image", "Bootstrap"], ["StaticText", "Cheatsheet"]]],
      ["StaticText", "Cheatsheet and more"],
    ]]);
    expect(out).toBe('h1 "Bootstrap Cheatsheet"\n img "Bootstrap"\nCheatsheet and more');
  });

  it("leaves out a main that is the page's only landmark, and nests under main beside other landmarks", () => {
    const form = ["textbox", "Email", { focusable: true }] as const;
    expect(text(["RootWebArea", "", {}, [["main", "", {}, [["heading", "Sign in", { level: 1 }, [["StaticText", "Sign in"]]], form]]]])).toBe(
      'h1 Sign in\ntextbox "Email" [g7e1]',
    );
    expect(text(["RootWebArea", "", {}, [["navigation", "", {}, [["link", "Home", { focusable: true }]]], ["main", "", {}, [form]]]])).toBe(
      'navigation\n [Home](g7e1)\nmain\n textbox "Email" [g7e2]',
    );
    // A main a user can act on (a skip link's target) keeps its line and ref.
    expect(text(["RootWebArea", "", {}, [["main", "", { focusable: true }, [form]]]])).toBe('main [g7e1]\n textbox "Email" [g7e2]');
  });

  it("writes a heading with its level and a plain table row as cells", () => {
    const out = text(["RootWebArea", "", {}, [
      ["heading", "Prices", { level: 2 }, [["StaticText", "Prices"]]],
      ["table", "", {}, [["row", "", {}, [["cell", "", {}, [["StaticText", "Tea"]]], ["cell", "", {}, [["StaticText", "$2"]]]]]]],
    ]]);
    expect(out).toBe("h2 Prices\ntable\n Tea | $2");
  });

  it("bounds the lines and counts what it left out per role", () => {
    const lines = compactLines(page(["RootWebArea", "", {}, [
      ["button", "A", { focusable: true }], ["button", "B", { focusable: true }], ["link", "C", { focusable: true }], ["paragraph", "", {}, [["StaticText", "D"]]],
    ]]), false);
    const { kept, omitted } = boundLines(lines, 1);
    expect(kept.map((l) => l.text)).toEqual(['button "A" [g7e1]']);
    expect(omitted).toEqual({ button: 1, link: 1, StaticText: 1 });
    expect(omittedLine(omitted, 1)).toBe("… 3 more nodes left out (maxNodes 1): 1 button, 1 link, 1 StaticText; use interactiveOnly or raise maxNodes");
  });

  it("says what changed between two snapshots of one document", () => {
    const before = lineKeys([
      { depth: 0, text: 'spinbutton "Qty" ="1" [g2e8]', role: "spinbutton", ref: "g2e8" },
      { depth: 0, text: 'button "Undo" [g2e9]', role: "button", ref: "g2e9" },
      { depth: 0, text: "Cart", role: "StaticText" },
    ]);
    const diff = diffLines(before, [
      { depth: 0, text: 'spinbutton "Qty" ="2" [g2e8]', role: "spinbutton", ref: "g2e8" },
      { depth: 0, text: "Cart", role: "StaticText" },
      { depth: 1, text: "Saved", role: "StaticText" },
    ]);
    expect(diff.lines).toEqual(['~ spinbutton "Qty" ="2" [g2e8]', "+ Saved", '- button "Undo" [g2e9]']);
    expect(diff).toMatchObject({ added: 1, changed: 1, removed: 1, removedRefs: ["g2e9"] });
  });
});

const GRAPHICS_TREE = {
  nodes: [
    { nodeId: "1", role: { value: "RootWebArea" }, name: { value: "Board" }, childIds: ["2", "3", "4", "5"], backendDOMNodeId: 1 },
    { nodeId: "2", role: { value: "image" }, name: { value: "" }, parentId: "1", backendDOMNodeId: 60 },
    { nodeId: "3", role: { value: "Canvas" }, name: { value: "" }, parentId: "1", backendDOMNodeId: 61 },
    { nodeId: "4", role: { value: "textbox" }, name: { value: "Bio" }, value: { value: "y".repeat(1398) }, parentId: "1", backendDOMNodeId: 62, properties: [{ name: "multiline", value: { value: true } }] },
    { nodeId: "5", role: { value: "textbox" }, name: { value: "Password" }, value: { value: "hunter2" }, parentId: "1", backendDOMNodeId: 63 },
  ],
};

async function ready(): Promise<{ h: ReturnType<typeof makeHarness>; tabId: number; session: FakeSocket }> {
  const h = makeHarness();
  enroll(h.store);
  installLoginPage(h.chrome);
  const device = await connectDevice(h);
  const { tabId, session } = await provision(h, device, LEASE_A, ["https://example.com"]);
  return { h, tabId, session };
}

function result(frame: Record<string, unknown>): Record<string, unknown> {
  if (frame.result === undefined) throw new Error(`no result: ${JSON.stringify(frame)}`);
  return frame.result as Record<string, unknown>;
}

describe("the compact header", () => {
  it("names the page by title and URL, and by URL alone when the title only repeats it", () => {
    expect(pageLabel("Sign in", "https://example.com/login")).toBe("Sign in — https://example.com/login");
    // Chromium titles a document without <title> with its URL, scheme left out.
    expect(pageLabel("127.0.0.1:8000/sign-in/index.html", "http://127.0.0.1:8000/sign-in/index.html")).toBe("http://127.0.0.1:8000/sign-in/index.html");
    expect(pageLabel("example.com", "https://example.com/")).toBe("https://example.com/");
    expect(pageLabel("", "about:blank")).toBe("about:blank");
    expect(pageLabel("about:blank", "about:blank")).toBe("about:blank");
  });
});

describe("the snapshot command", () => {
  it("keeps the structured nodes the default and gives compact text on request", async () => {
    const { session } = await ready();
    const nodes = result(await read(session, { name: "snapshot" }));
    expect(nodes.text).toBeUndefined();
    expect((nodes.nodes as unknown[]).length).toBeGreaterThan(0);
    const compact = result(await read(session, { name: "snapshot", format: "compact" }));
    expect(compact.nodes).toEqual([]);
    expect(compact.snapshotId).toMatch(/^g\d+s2$/);
    const lines = String(compact.text).split("\n");
    // The fake tab is about:blank, whose title says no more than its URL.
    expect(lines[0]).toBe(`# about:blank (${String(compact.snapshotId)})`);
    expect(lines.slice(1)).toEqual([
      expect.stringMatching(/^textbox "Email" ="jane@example.com" \[g\d+e\d+\]$/),
      expect.stringMatching(/^textbox "Password" password \[g\d+e\d+\]$/),
      expect.stringMatching(/^button "Sign in" \[g\d+e\d+\]$/),
    ]);
    expect(String(compact.text)).not.toContain("hunter2");
    // Refs minted for the structured nodes do not leak wrappers into the text of both forms.
    const both = result(await read(session, { name: "snapshot", format: "both" }));
    expect(String(both.text).split("\n").slice(1)).toEqual(lines.slice(1));
  });

  it("reports a clickable SVG and an unnamed canvas by their attributes, and a cut value's length", async () => {
    const { h, session } = await ready();
    h.chrome.handlers.set("Accessibility.getFullAXTree", () => structuredClone(GRAPHICS_TREE));
    h.chrome.handlers.set("DOM.describeNode", (params) => ({ node: { attributes: params.backendNodeId === 63 ? ["type", "password"] : [] } }));
    h.chrome.handlers.set("Runtime.callFunctionOn", (params) => ({
      result: {
        value: String(params.objectId) === "obj-60"
          ? { tag: "svg", attributes: { id: "star", "aria-describedby": "tip" }, pointer: false }
          : { tag: "canvas", attributes: { id: "board" }, pointer: false },
      },
    }));
    h.chrome.handlers.set("DOMDebugger.getEventListeners", (params) => ({ listeners: String(params.objectId) === "obj-60" ? [{ type: "click" }] : [] }));
    const both = result(await read(session, { name: "snapshot", format: "both" }));
    const nodes = both.nodes as Record<string, unknown>[];
    expect(nodes.find((n) => n.role === "image")).toMatchObject({ clickable: true, attributes: { id: "star", "aria-describedby": "tip" } });
    const canvas = nodes.find((n) => n.role === "Canvas");
    expect(canvas).toMatchObject({ attributes: { id: "board" } });
    expect(canvas?.clickable).toBeUndefined();
    expect(nodes.find((n) => n.name === "Bio")).toMatchObject({ valueLength: 1398, multiline: true });
    expect(nodes.find((n) => n.name === "Password")).not.toHaveProperty("value");
    expect(String(both.text)).toMatch(/svg clickable id=star aria-describedby=tip \[g\d+e\d+\]/);
    expect(String(both.text)).toMatch(/canvas id=board \[g\d+e\d+\]/);
    expect(String(both.text)).toContain("…[cut: 1398 chars]");
    expect(h.chrome.callsOf("Runtime.releaseObjectGroup").length).toBe(1);
  });

  it("counts what a bounded snapshot left out per role", async () => {
    const { session } = await ready();
    const bounded = result(await read(session, { name: "snapshot", format: "compact", maxNodes: 1 }));
    expect(bounded).toMatchObject({ truncated: true, omitted: { textbox: 1, button: 1 } });
    expect(String(bounded.text)).toContain("… 2 more nodes left out (maxNodes 1): 1 button, 1 textbox");
    const nodes = result(await read(session, { name: "snapshot", maxNodes: 2 }));
    expect(nodes).toMatchObject({ truncated: true, omitted: { textbox: 1, button: 1 } });
  });

  it("answers changes in the structured form with only the nodes that are new or changed", async () => {
    const { h, session } = await ready();
    const first = result(await read(session, { name: "snapshot" }));
    const before = first.nodes as Record<string, unknown>[];
    const password = before.find((n) => n.name === "Password");
    h.chrome.handlers.set("Accessibility.getFullAXTree", () => ({
      nodes: [
        { nodeId: "1", role: { value: "RootWebArea" }, name: { value: "Sign in" }, childIds: ["3", "5", "6"], backendDOMNodeId: 1 },
        { nodeId: "3", role: { value: "textbox" }, name: { value: "Email" }, value: { value: "joe@example.com" }, parentId: "1", backendDOMNodeId: 43 },
        { nodeId: "5", role: { value: "button" }, name: { value: "Sign in" }, parentId: "1", backendDOMNodeId: 42 },
        { nodeId: "6", role: { value: "StaticText" }, name: { value: "Check your email" }, parentId: "1", backendDOMNodeId: 71 },
      ],
    }));
    const diff = result(await read(session, { name: "snapshot", changesSince: String(first.snapshotId) }));
    expect(diff.changes).toMatchObject({ status: "compared", added: 1, changed: 1, removed: 1, removedRefs: [password?.ref] });
    expect((diff.nodes as Record<string, unknown>[]).map((n) => [n.role, n.name, n.value])).toEqual([
      ["textbox", "Email", "joe@example.com"],
      ["StaticText", "Check your email", undefined],
    ]);
  });

  it("answers changes since the latest snapshot, and a full snapshot after a navigation", async () => {
    const { h, tabId, session } = await ready();
    const first = result(await read(session, { name: "snapshot", format: "compact" }));
    const changed = structuredClone(GRAPHICS_TREE);
    changed.nodes = [
      { nodeId: "1", role: { value: "RootWebArea" }, name: { value: "Sign in" }, childIds: ["5", "6"], backendDOMNodeId: 1 },
      { nodeId: "5", role: { value: "button" }, name: { value: "Sign in" }, parentId: "1", backendDOMNodeId: 42 },
      { nodeId: "6", role: { value: "StaticText" }, name: { value: "Wrong password" }, parentId: "1", backendDOMNodeId: 70 },
    ] as typeof changed.nodes;
    h.chrome.handlers.set("Accessibility.getFullAXTree", () => structuredClone(changed));
    const since = String(first.snapshotId);
    const diff = result(await read(session, { name: "snapshot", format: "compact", changesSince: since }));
    expect(diff.changes).toMatchObject({ since, status: "compared", added: 1, changed: 0, removed: 2 });
    const text = String(diff.text).split("\n").slice(1);
    expect(text).toEqual(["+ Wrong password", expect.stringMatching(/^- textbox "Email"/), expect.stringMatching(/^- textbox "Password"/)]);
    // Not the latest any more: a full snapshot that says why.
    const stale = result(await read(session, { name: "snapshot", format: "compact", changesSince: since }));
    expect(stale.changes).toEqual({ since, status: "unavailable" });
    expect(String(stale.text)).toContain("Wrong password");
    const latest = String(stale.snapshotId);
    h.chrome.emitCdp(tabId, "Page.frameNavigated", { frame: { id: `main-${String(tabId)}`, loaderId: "L9", url: "https://example.com/next" }, type: "Navigation" });
    await settle();
    const after = result(await read(session, { name: "snapshot", format: "compact", changesSince: latest }));
    expect(after.changes).toEqual({ since: latest, status: "navigated" });
    expect(String(after.text).split("\n")[0]).toContain("; the page navigated since");
  });
});
