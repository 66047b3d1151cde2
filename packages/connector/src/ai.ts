/**
 * The command catalog as tools for the Vercel AI SDK (`tool()` from `ai`), which Mastra agents
 * also accept. Each tool's input schema is the catalog command's zod schema generated from
 * spec/frames/commands.json (without `name`, plus `dryRun` for writes).
 *
 * Writes go through an approval policy, refusing them by default as the Python MCP server does:
 * `"none"` (the default: every write is refused before it is sent, dry runs still preview),
 * `"all"`, `"reads-only"` (write tools are not offered), or your own `ApproveHook`. A session
 * opened with its own `approve` hook asks it too: a write runs only when both approve.
 *
 *     import { understudyTools } from "@understudy/connector/ai";
 *     await using session = await client.openSession({ allowedOrigins, profileStateKey });
 *     const tools = understudyTools(session, { approval: async (write) => askAHuman(write) });
 *     await generateText({ model, tools, prompt });
 */
import { randomUUID } from "node:crypto";

import type { Command, CommandName, CommandResult } from "@understudy/protocol";
import { WRITE_COMMANDS, isWriteCommand } from "@understudy/protocol";
import { Command as CommandSchema } from "@understudy/protocol/zod";
import { type Tool, tool } from "ai";
import { z } from "zod";

import { CommandFailed, ProblemError, UnderstudyError, WriteRefused } from "./errors.js";
import type { ApproveHook, Session, WriteRequest } from "./session.js";

/** How writes are governed: a policy name or a hook that decides each write. */
export type ApprovalPolicy = "none" | "all" | "reads-only" | ApproveHook;

/** What a tool call returns to the model: the result, or an error it can act on. */
export type ToolOutcome =
  | { readonly ok: true; readonly result: CommandResult }
  | {
      readonly ok: false;
      readonly error: { readonly kind: string; readonly code?: string; readonly message: string; readonly advice?: string };
    };

const DRY_RUN = z
  .boolean()
  .optional()
  .describe("Resolve the target and check the policy without acting; nothing changes.");

const ADVICE: Readonly<Record<string, string>> = {
  stale_ref: "the page changed since that snapshot: call snapshot and use a ref from it",
  ref_not_found: "no element has that ref: call snapshot and pick a ref from it",
  element_not_interactable: "the element is hidden, disabled or covered: scroll it into view or pick another",
  origin_not_allowed: "that origin is outside the session's allowed origins: stay within them",
  navigation_failed: "the page did not load: check the URL, then try again",
  command_outcome_unknown: "the write may have happened: call snapshot to see the page; do not repeat it blindly",
  writes_blocked: "writes on this session are blocked; reads still work",
  write_refused: "the operator's approval policy refused this write; do not retry it",
};

/** The input schema of each catalog command's tool, by command name. */
export function toolSchemas(): Map<CommandName, z.ZodObject> {
  const schemas = new Map<CommandName, z.ZodObject>();
  for (const option of CommandSchema.options) {
    const name = option.shape.name.value;
    let input = (option as unknown as z.ZodObject).omit({ name: true });
    if (isWriteCommand(name)) input = input.extend({ dryRun: DRY_RUN });
    const description = option.description;
    schemas.set(name, description === undefined ? input : input.describe(description));
  }
  return schemas;
}

function hookOf(policy: ApprovalPolicy): ApproveHook {
  if (typeof policy === "function") return policy;
  return () => policy === "all";
}

/**
 * One AI SDK tool per catalog command, driving `session`. Reads run at once; writes are first
 * put to `approval` (refused by default), and a refused write is never sent.
 */
export function understudyTools(
  session: Session,
  options: { approval?: ApprovalPolicy } = {},
): Record<string, Tool<Record<string, unknown>, ToolOutcome>> {
  const policy = options.approval ?? "none";
  const approve = hookOf(policy);
  const tools: Record<string, Tool<Record<string, unknown>, ToolOutcome>> = {};
  for (const [name, schema] of toolSchemas()) {
    const write = (WRITE_COMMANDS as ReadonlySet<string>).has(name);
    if (write && policy === "reads-only") continue;
    tools[name] = tool<Record<string, unknown>, ToolOutcome>({
      description: `${schema.description ?? name} (${write ? "a write: needs approval" : "a read"})`,
      inputSchema: schema as unknown as z.ZodType<Record<string, unknown>>,
      execute: async (input, { abortSignal }) => {
        const { dryRun, ...args } = input as { dryRun?: boolean } & Record<string, unknown>;
        const command = { ...args, name } as Command;
        return runTool(session, command, dryRun === true, write ? approve : undefined, abortSignal);
      },
    });
  }
  return tools;
}

async function runTool(
  session: Session,
  command: Command,
  dryRun: boolean,
  approve: ApproveHook | undefined,
  signal: AbortSignal | undefined,
): Promise<ToolOutcome> {
  // The id the approval is given for is the id the write is sent with (correlate it in audit).
  const commandId = randomUUID();
  try {
    if (approve !== undefined && !dryRun) {
      const request: WriteRequest = { sessionId: session.id, commandId, command };
      const decision = await approve(request);
      if (decision !== true) throw new WriteRefused(command.name, commandId);
    }
    const result = await session.execute(command, { dryRun, commandId, ...(signal === undefined ? {} : { signal }) });
    return { ok: true, result };
  } catch (error) {
    if (!(error instanceof UnderstudyError)) throw error;
    return { ok: false, error: describe(error) };
  }
}

function describe(error: UnderstudyError): Extract<ToolOutcome, { ok: false }>["error"] {
  const code =
    error instanceof CommandFailed || error instanceof ProblemError
      ? error.code
      : error instanceof WriteRefused
        ? "write_refused"
        : undefined;
  const advice = code === undefined ? undefined : ADVICE[code];
  return {
    kind: error.name,
    message: error.message,
    ...(code === undefined ? {} : { code }),
    ...(advice === undefined ? {} : { advice }),
  };
}
