/**
 * Structural checks of frames received from the backend, and of the command a frame carries.
 * The tables are keyed by the generated unions' discriminants, so adding a frame or a command to
 * the spec breaks the build here until someone describes its fields. Errors carry a path
 * (`provision.leaseEpoch: expected integer`) so a backend developer sees what was wrong.
 */
import type { Command, CommandName, DeviceServerFrame, SessionServerFrame } from "@understudy/protocol";

type Kind = "string" | "integer" | "boolean" | "array" | "object" | "ref";

interface Shape {
  readonly required: Readonly<Record<string, Kind>>;
  readonly optional?: Readonly<Record<string, Kind>>;
}

export type Decoded<T> = { ok: true; value: T } | { ok: false; message: string };

const REF_PATTERN = /^g[0-9]{1,9}e[0-9]{1,9}$/;

const DEVICE_SERVER_SHAPES: Readonly<Record<DeviceServerFrame["type"], Shape>> = {
  welcome: {
    required: { deviceId: "string", protocolVersion: "integer", connectionEpoch: "integer", heartbeatIntervalMs: "integer", serverTime: "string" },
  },
  heartbeat_ack: { required: { seq: "integer", serverTime: "string" } },
  provision: {
    required: { leaseId: "string", sessionId: "string", leaseEpoch: "integer", allowedOrigins: "array", deadlineAt: "string" },
  },
  close: { required: { leaseId: "string", sessionId: "string", leaseEpoch: "integer", reason: "string" } },
  session_ticket: {
    required: { sessionId: "string", leaseId: "string", leaseEpoch: "integer", ticket: "string", socketUrl: "string", expiresAt: "string" },
  },
  attach_result: {
    required: { requestId: "string", sessionId: "string", outcome: "string" },
    optional: { leaseId: "string", leaseEpoch: "integer", allowedOrigins: "array", error: "object" },
  },
  error: { required: { code: "string", message: "string" } },
};

const SESSION_SERVER_SHAPES: Readonly<Record<SessionServerFrame["type"], Shape>> = {
  hello_ack: { required: { sessionId: "string", leaseEpoch: "integer", cancel: "array", unknown: "array", writesBlocked: "boolean" } },
  read: { required: { commandId: "string", command: "object", deadlineAt: "string" } },
  write_prepare: { required: { commandId: "string", name: "string", leaseEpoch: "integer", dryRun: "boolean", readyBy: "string" } },
  write_grant: {
    required: { commandId: "string", leaseEpoch: "integer", command: "object", dryRun: "boolean", deadlineAt: "string" },
    optional: { secretValue: "string" },
  },
  result_ack: { required: { commandId: "string" } },
  dialog_ack: { required: { dialogId: "string" } },
  cancel: { required: { commandId: "string", reason: "string" } },
  error: { required: { code: "string", message: "string" }, optional: { commandId: "string" } },
};

const COMMAND_SHAPES: Readonly<Record<CommandName, Shape>> = {
  hello: { required: {} },
  get_tabs: { required: {} },
  snapshot: { required: {}, optional: { interactiveOnly: "boolean", maxNodes: "integer", format: "string", changesSince: "string" } },
  screenshot: { required: {}, optional: { format: "string", quality: "integer", maxWidth: "integer" } },
  wait_for: { required: { condition: "object" }, optional: { timeoutMs: "integer" } },
  navigate: { required: { url: "string" } },
  go_back: { required: {} },
  go_forward: { required: {} },
  reload: { required: {} },
  click: { required: { ref: "ref" }, optional: { button: "string", clickCount: "integer", modifiers: "array" } },
  hover: { required: { ref: "ref" } },
  drag: { required: { ref: "ref" }, optional: { targetRef: "ref", dx: "integer", dy: "integer", steps: "integer" } },
  focus: { required: { ref: "ref" } },
  select_text: { required: {}, optional: { ref: "ref", text: "string", start: "integer", end: "integer" } },
  type: { required: { ref: "ref", text: "string" }, optional: { submit: "boolean", delivery: "string" } },
  fill: { required: { ref: "ref", value: "string" } },
  fill_secret: { required: { ref: "ref", secretRef: "string" } },
  press_key: { required: { key: "string" }, optional: { modifiers: "array" } },
  select_option: { required: { ref: "ref", values: "array" } },
  set_checked: { required: { ref: "ref", checked: "boolean" } },
  scroll: { required: {}, optional: { ref: "ref", deltaX: "integer", deltaY: "integer" } },
  switch_tab: { required: { tabId: "integer" } },
};

function kindMatches(kind: Kind, value: unknown): boolean {
  switch (kind) {
    case "string":
      return typeof value === "string";
    case "integer":
      return Number.isSafeInteger(value);
    case "boolean":
      return typeof value === "boolean";
    case "array":
      return Array.isArray(value);
    case "object":
      return typeof value === "object" && value !== null && !Array.isArray(value);
    case "ref":
      return typeof value === "string" && REF_PATTERN.test(value);
    default: {
      const unreachable: never = kind;
      return unreachable;
    }
  }
}

function checkShape(label: string, record: Record<string, unknown>, shape: Shape, discriminant: string): string | undefined {
  const known = new Set([discriminant, ...Object.keys(shape.required), ...Object.keys(shape.optional ?? {})]);
  for (const [field, kind] of Object.entries(shape.required)) {
    if (!(field in record)) return `${label}.${field}: required`;
    if (!kindMatches(kind, record[field])) return `${label}.${field}: expected ${kind}`;
  }
  for (const [field, kind] of Object.entries(shape.optional ?? {})) {
    if (field in record && !kindMatches(kind, record[field])) return `${label}.${field}: expected ${kind}`;
  }
  for (const field of Object.keys(record)) {
    if (!known.has(field)) return `${label}.${field}: unknown field`;
  }
  return undefined;
}

function decodeWith<T>(raw: unknown, key: string, shapes: Readonly<Record<string, Shape>>): Decoded<T> {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return { ok: false, message: "frame: expected a JSON object" };
  const record = raw as Record<string, unknown>;
  const tag = record[key];
  if (typeof tag !== "string" || !Object.hasOwn(shapes, tag)) {
    return { ok: false, message: `${key}: unknown value ${JSON.stringify(tag).slice(0, 64)}` };
  }
  const shape = shapes[tag];
  if (shape === undefined) return { ok: false, message: `${key}: unknown` };
  const problem = checkShape(tag, record, shape, key);
  return problem === undefined ? { ok: true, value: raw as T } : { ok: false, message: problem };
}

/** Decodes a device-socket frame from the backend. */
export function decodeDeviceServerFrame(raw: unknown): Decoded<DeviceServerFrame> {
  return decodeWith<DeviceServerFrame>(raw, "type", DEVICE_SERVER_SHAPES);
}

/** Decodes a session-socket frame from the backend (the embedded command is checked separately). */
export function decodeSessionServerFrame(raw: unknown): Decoded<SessionServerFrame> {
  return decodeWith<SessionServerFrame>(raw, "type", SESSION_SERVER_SHAPES);
}

/** Checks a command's name and fields against the catalog. */
export function decodeCommand(raw: unknown): Decoded<Command> {
  return decodeWith<Command>(raw, "name", COMMAND_SHAPES);
}
