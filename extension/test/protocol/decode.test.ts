import { describe, expect, it } from "vitest";

import { COMMAND_FIELDS, DEVICE_SERVER_FIELDS, SESSION_SERVER_FIELDS, type FieldKind } from "@understudy/protocol";
import { decodeCommand, decodeDeviceServerFrame, decodeSessionServerFrame, type Decoded } from "../../src/protocol/decode";
// The spec's own files: the examples and schemas below are read from them, not copied.
import commandsJson from "../../../spec/frames/commands.json";
import commonJson from "../../../spec/frames/common.json";
import deviceSocketJson from "../../../spec/frames/device-socket.json";
import sessionSocketJson from "../../../spec/frames/session-socket.json";

interface Schema {
  readonly $ref?: string;
  readonly type?: string;
  readonly const?: unknown;
  readonly oneOf?: readonly Schema[];
  readonly anyOf?: readonly Schema[];
  readonly required?: readonly string[];
  readonly properties?: Readonly<Record<string, Schema>>;
  readonly discriminator?: { readonly propertyName: string; readonly mapping: Readonly<Record<string, string>> };
  readonly examples?: readonly unknown[];
}

interface SchemaFile {
  readonly $defs?: Readonly<Record<string, Schema>>;
}

/** A schema file as this test reads it (the imported JSON's literal type says too much). */
const asFile = (doc: unknown): SchemaFile => doc as SchemaFile;

const FILES: ReadonlyMap<string, SchemaFile> = new Map<string, SchemaFile>([
  ["commands.json", asFile(commandsJson)],
  ["common.json", asFile(commonJson)],
  ["device-socket.json", asFile(deviceSocketJson)],
  ["session-socket.json", asFile(sessionSocketJson)],
]);

interface Located {
  readonly file: string;
  readonly name: string;
  readonly schema: Schema;
}

/** The definition a `$ref` of `file` names (`#/$defs/X` or `other.json#/$defs/X`). */
function lookUp(file: string, ref: string): Located {
  const [target, pointer = ""] = ref.split("#");
  const where = target === undefined || target === "" ? file : target;
  const name = pointer.replace("/$defs/", "");
  const schema = FILES.get(where)?.$defs?.[name];
  if (schema === undefined) throw new Error(`${file}: $ref ${ref} names nothing`);
  return { file: where, name, schema };
}

/** The decoder's kind of a property schema, worked out from the schema alone. */
function kindOf(file: string, schema: Schema): FieldKind {
  let here = { file, name: "", schema };
  while (here.schema.$ref !== undefined) {
    here = lookUp(here.file, here.schema.$ref);
    if (here.name === "Ref") return "ref";
  }
  const branches = here.schema.oneOf ?? here.schema.anyOf;
  if (branches !== undefined) {
    const kinds = new Set(branches.map((branch) => kindOf(here.file, branch)));
    if (kinds.size !== 1) throw new Error(`mixed kinds ${[...kinds].join(", ")}`);
    return [...kinds][0] as FieldKind;
  }
  if (here.schema.type !== undefined) return here.schema.type as FieldKind;
  if (typeof here.schema.const === "string") return "string";
  throw new Error(`no kind for ${JSON.stringify(here.schema)}`);
}

interface Union {
  readonly name: string;
  readonly file: string;
  readonly table: Readonly<Record<string, { readonly required: object; readonly optional: object }>>;
  readonly decode: (raw: unknown) => Decoded<unknown>;
}

const UNIONS: readonly Union[] = [
  { name: "DeviceServerFrame", file: "device-socket.json", table: DEVICE_SERVER_FIELDS, decode: decodeDeviceServerFrame },
  { name: "SessionServerFrame", file: "session-socket.json", table: SESSION_SERVER_FIELDS, decode: decodeSessionServerFrame },
  { name: "Command", file: "commands.json", table: COMMAND_FIELDS, decode: decodeCommand },
];

/** Each branch of a union: its discriminant value, its schema, and the examples the spec gives. */
function branches(union: Union): { tag: string; key: string; branch: Located; examples: readonly unknown[] }[] {
  const root = lookUp(union.file, `#/$defs/${union.name}`);
  const discriminator = root.schema.discriminator;
  if (discriminator === undefined) throw new Error(`${union.name} has no discriminator`);
  return Object.entries(discriminator.mapping).map(([tag, ref]) => {
    const branch = lookUp(root.file, ref);
    const own = branch.schema.examples ?? [];
    const fromUnion = (root.schema.examples ?? []).filter((e) => (e as Record<string, unknown>)[discriminator.propertyName] === tag);
    return { tag, key: discriminator.propertyName, branch, examples: [...own, ...fromUnion] };
  });
}

describe("frame decoding", () => {
  it("accepts the spec's examples", () => {
    let checked = 0;
    for (const union of UNIONS) {
      for (const { tag, examples } of branches(union)) {
        expect(examples.length, `${union.name} ${tag} has examples`).toBeGreaterThan(0);
        for (const example of examples) {
          expect(union.decode(example), `${union.name} ${tag}`).toEqual({ ok: true, value: example });
          const command = (example as Record<string, unknown>).command;
          if (command !== undefined) expect(decodeCommand(command).ok, `${tag}.command`).toBe(true);
          checked += 1;
        }
      }
    }
    // 7 device frames, 8 session frames, 20 commands, each with at least one example.
    expect(checked).toBeGreaterThanOrEqual(35);
  });

  it("refuses each example with an unknown field or without a required one", () => {
    for (const union of UNIONS) {
      for (const { tag, key, branch, examples } of branches(union)) {
        for (const example of examples as Record<string, unknown>[]) {
          expect(union.decode({ ...example, zzUnknown: 1 })).toEqual({ ok: false, message: `${tag}.zzUnknown: unknown field` });
          for (const field of branch.schema.required ?? []) {
            if (field === key) continue;
            const rest = { ...example };
            delete rest[field];
            expect(union.decode(rest)).toEqual({ ok: false, message: `${tag}.${field}: required` });
          }
        }
      }
    }
  });

  it("has generated tables that match the schemas field by field", () => {
    for (const union of UNIONS) {
      const seen = branches(union);
      expect(Object.keys(union.table).sort()).toEqual(seen.map((b) => b.tag).sort());
      for (const { tag, key, branch } of seen) {
        const required = new Set((branch.schema.required ?? []).filter((f) => f !== key));
        const expected: { required: Record<string, FieldKind>; optional: Record<string, FieldKind> } = { required: {}, optional: {} };
        for (const [field, schema] of Object.entries(branch.schema.properties ?? {})) {
          if (field === key) continue;
          expected[required.has(field) ? "required" : "optional"][field] = kindOf(branch.file, schema);
        }
        expect(union.table[tag], `${union.name} ${tag}`).toEqual(expected);
      }
    }
  });

  it("names the field that is wrong", () => {
    expect(decodeDeviceServerFrame({ type: "provision", leaseId: "l", sessionId: "s", leaseEpoch: "1", allowedOrigins: [], deadlineAt: "t" })).toEqual({
      ok: false,
      message: "provision.leaseEpoch: expected integer",
    });
    expect(decodeSessionServerFrame({ type: "result_ack" })).toEqual({ ok: false, message: "result_ack.commandId: required" });
    expect(decodeSessionServerFrame({ type: "result_ack", commandId: "c", extra: 1 })).toEqual({ ok: false, message: "result_ack.extra: unknown field" });
    expect(decodeDeviceServerFrame({ type: "launch_missiles" })).toEqual({ ok: false, message: 'type: unknown value "launch_missiles"' });
    expect(decodeDeviceServerFrame("not json")).toEqual({ ok: false, message: "frame: expected a JSON object" });
  });

  it("checks commands against the catalog, refs included", () => {
    expect(decodeCommand({ name: "click", ref: "g2e14" }).ok).toBe(true);
    expect(decodeCommand({ name: "click", ref: "#submit" })).toEqual({ ok: false, message: "click.ref: expected ref" });
    expect(decodeCommand({ name: "scroll", ref: "g2e14", deltaY: 1.5 })).toEqual({ ok: false, message: "scroll.deltaY: expected integer" });
    expect(decodeCommand({ name: "eval", code: "1" }).ok).toBe(false);
  });
});
