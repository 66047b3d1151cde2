/**
 * Zod validators of the command catalog and of the HTTP bodies, generated from spec/: the
 * TypeScript connector checks every response and every tool call's arguments with them.
 */
export * from "./generated/zod.js";
