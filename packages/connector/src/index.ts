/**
 * `@understudy/connector`: a typed Understudy client for Node 20+ on `fetch`, with the outcome
 * rules of the write protocol built in (the same rules, pinned by the same scenario table, as the
 * Python connector). Agent framework tools are in `@understudy/connector/ai`.
 */
export { Client, DEFAULT_HTTP_TIMEOUT_MS, VERSION } from "./client.js";
export type { ClientOptions, CreateSessionOptions, SubmitOptions } from "./client.js";
export { DEFAULT_RETRY, backoff } from "./config.js";
export type { RetryConfig } from "./config.js";
export * from "./errors.js";
export type { ConnectorEvent, WaitReason } from "./http.js";
export { Session } from "./session.js";
export type { ApproveHook, RunOptions, SessionOptions, SessionState, WriteRequest } from "./session.js";
export { isTombstone } from "./sessionFlow.js";
