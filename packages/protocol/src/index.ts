/**
 * The Understudy wire protocol, generated from spec/ by `make codegen`: every frame, command,
 * result and HTTP body as a TypeScript type, the command catalog and the documented problem codes.
 *
 * The zod validators live in the `@understudy/protocol/zod` entry point, so a consumer that only
 * needs the types (the extension) does not bundle zod.
 */
export type * from "./generated/wire.js";
export * from "./generated/catalog.js";
export * from "./generated/problems.js";
export * from "./generated/protocol.js";
export * from "./generated/frames.js";
