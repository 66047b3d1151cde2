/**
 * Structural checks of frames received from the backend, and of the command a frame carries.
 * The field tables are generated from the spec (@understudy/protocol, generated/frames.ts) and typed against the
 * generated unions, so a frame or a field added to the spec is known here as soon as codegen ran.
 * What the extension does with each field is declared in `handled.ts`, which does not compile
 * until a new field is listed there. Errors carry a path (`provision.leaseEpoch: expected
 * integer`) so a backend developer sees what was wrong.
 */
import { COMMAND_FIELDS, DEVICE_SERVER_FIELDS, SESSION_SERVER_FIELDS, type FieldKind } from "@understudy/protocol";
import type { Command, DeviceServerFrame, SessionServerFrame } from "@understudy/protocol";

interface Shape {
  readonly required: Readonly<Record<string, FieldKind>>;
  readonly optional: Readonly<Record<string, FieldKind>>;
}

export type Decoded<T> = { ok: true; value: T } | { ok: false; message: string };

const REF_PATTERN = /^g[0-9]{1,9}e[0-9]{1,9}$/;

function kindMatches(kind: FieldKind, value: unknown): boolean {
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
  const known = new Set([discriminant, ...Object.keys(shape.required), ...Object.keys(shape.optional)]);
  for (const [field, kind] of Object.entries(shape.required)) {
    if (!(field in record)) return `${label}.${field}: required`;
    if (!kindMatches(kind, record[field])) return `${label}.${field}: expected ${kind}`;
  }
  for (const [field, kind] of Object.entries(shape.optional)) {
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
  return decodeWith<DeviceServerFrame>(raw, "type", DEVICE_SERVER_FIELDS);
}

/** Decodes a session-socket frame from the backend (the embedded command is checked separately). */
export function decodeSessionServerFrame(raw: unknown): Decoded<SessionServerFrame> {
  return decodeWith<SessionServerFrame>(raw, "type", SESSION_SERVER_FIELDS);
}

/** Checks a command's name and fields against the catalog. */
export function decodeCommand(raw: unknown): Decoded<Command> {
  return decodeWith<Command>(raw, "name", COMMAND_FIELDS);
}
