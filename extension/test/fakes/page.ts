/** A small accessibility tree and helpers to snapshot it through the session socket. */
import type { FakeChrome } from "./fakeChrome";
import type { FakeSocket } from "./fakeSocket";
import { FUTURE, nextUuid, settle } from "./harness";

export const BUTTON_NODE = 42;
export const EMAIL_NODE = 43;
export const PASSWORD_NODE = 44;

export const LOGIN_TREE = {
  nodes: [
    { nodeId: "1", ignored: false, role: { value: "RootWebArea" }, name: { value: "Sign in" }, childIds: ["2"], backendDOMNodeId: 1 },
    { nodeId: "2", ignored: true, role: { value: "generic" }, parentId: "1", childIds: ["3", "4", "5"], backendDOMNodeId: 2 },
    { nodeId: "3", ignored: false, role: { value: "textbox" }, name: { value: "Email" }, value: { value: "jane@example.com" }, parentId: "2", backendDOMNodeId: EMAIL_NODE },
    { nodeId: "4", ignored: false, role: { value: "textbox" }, name: { value: "Password" }, value: { value: "hunter2" }, parentId: "2", backendDOMNodeId: PASSWORD_NODE },
    { nodeId: "5", ignored: false, role: { value: "button" }, name: { value: "Sign in" }, parentId: "2", backendDOMNodeId: BUTTON_NODE },
  ],
};

/** Installs the login page: its AX tree, its password field and a box model for every node. */
export function installLoginPage(chrome: FakeChrome): void {
  chrome.handlers.set("Accessibility.getFullAXTree", () => structuredClone(LOGIN_TREE));
  chrome.handlers.set("DOM.describeNode", (params) => ({
    node: { attributes: params.backendNodeId === PASSWORD_NODE ? ["type", "password", "name", "pw"] : ["type", "text"] },
  }));
  // Every node has the same box, and the hit test answers the node whose box was read last: an
  // uncovered page. Tests that cover an element replace DOM.getNodeForLocation.
  let lastBoxNode = 0;
  chrome.handlers.set("DOM.getBoxModel", (params) => {
    lastBoxNode = Number(params.backendNodeId);
    return { model: { content: [10, 20, 110, 20, 110, 60, 10, 60] } };
  });
  chrome.handlers.set("DOM.getNodeForLocation", () => ({ backendNodeId: lastBoxNode, frameId: "main" }));
  chrome.handlers.set("DOM.resolveNode", (params) => ({ object: { objectId: `obj-${String(params.backendNodeId)}` } }));
  chrome.handlers.set("Runtime.callFunctionOn", (params) => ({ result: { value: pageFunctionAnswer(String(params.functionDeclaration)) } }));
}

/** What the login page's script answers: its boxes never move, everything else is "ok". */
export function pageFunctionAnswer(functionDeclaration: string): string {
  return functionDeclaration.includes("requestAnimationFrame") ? "stable" : "ok";
}

/** Sends a read and returns the read_result the extension answered with. */
export async function read(session: FakeSocket, command: Record<string, unknown>): Promise<Record<string, unknown>> {
  const commandId = nextUuid();
  session.receive({ type: "read", commandId, command, deadlineAt: FUTURE });
  await settle();
  const result = session.framesOf("read_result").find((f) => f.commandId === commandId);
  if (result === undefined) throw new Error(`no read_result for ${JSON.stringify(command)}`);
  return result;
}

/** Takes a snapshot and returns the ref of the node with this role and name. */
export async function refOf(session: FakeSocket, role: string, name: string): Promise<string> {
  const result = await read(session, { name: "snapshot" });
  const nodes = (result.result as { nodes: { role: string; name: string; ref?: string }[] }).nodes;
  const ref = nodes.find((n) => n.role === role && n.name === name)?.ref;
  if (ref === undefined) throw new Error(`no ref for ${role} ${name}`);
  return ref;
}

/** Runs one write through prepare and grant; returns the result frame (if any). */
export async function write(
  session: FakeSocket,
  command: Record<string, unknown>,
  options: { dryRun?: boolean; secretValue?: string; commandId?: string; leaseEpoch?: number } = {},
): Promise<Record<string, unknown> | undefined> {
  const commandId = options.commandId ?? nextUuid();
  const leaseEpoch = options.leaseEpoch ?? 1;
  const dryRun = options.dryRun ?? false;
  session.receive({ type: "write_prepare", commandId, name: command.name, leaseEpoch, dryRun, readyBy: FUTURE });
  await settle();
  session.receive({
    type: "write_grant",
    commandId,
    leaseEpoch,
    command,
    dryRun,
    deadlineAt: FUTURE,
    ...(options.secretValue === undefined ? {} : { secretValue: options.secretValue }),
  });
  await settle();
  return session.framesOf("result").find((f) => f.commandId === commandId);
}
