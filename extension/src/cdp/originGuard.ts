/**
 * Top-level navigation containment. `Fetch.enable` pauses every Document request of the tab; the
 * guard continues those of subframes and those of the main frame whose URL the session's origin
 * policy allows (the initial about:blank included), and fails the rest with BlockedByClient
 * before any byte is sent. This covers Page.navigate, links, script navigation and server
 * redirects (each redirect hop pauses again). Subresources and iframes are not filtered.
 */
import type { OriginPolicy } from "../config/origins";

/** The Fetch.enable patterns: main-frame and subframe documents, paused before the request. */
export const ORIGIN_GUARD_PATTERNS = [{ urlPattern: "*", resourceType: "Document", requestStage: "Request" }] as const;

export interface RequestPausedParams {
  readonly requestId: string;
  readonly request: { readonly url: string };
  readonly frameId?: string;
  readonly resourceType?: string;
  /** Set when this request follows a server redirect of an earlier one. */
  readonly redirectedRequestId?: string;
}

export type GuardDecision = "continue" | "block";

/** Narrows an untyped CDP event payload. */
export function isRequestPaused(params: unknown): params is RequestPausedParams {
  if (typeof params !== "object" || params === null) return false;
  const p = params as { requestId?: unknown; request?: { url?: unknown } };
  return typeof p.requestId === "string" && typeof p.request?.url === "string";
}

/**
 * Decides one paused request. `mainFrameId` undefined means the main frame is not known yet, and
 * every document is then treated as a main-frame one (fail closed).
 */
export function decide(params: RequestPausedParams, policy: OriginPolicy, mainFrameId: string | undefined): GuardDecision {
  if (params.resourceType !== undefined && params.resourceType !== "Document") return "continue";
  const isMainFrame = mainFrameId === undefined || params.frameId === undefined || params.frameId === mainFrameId;
  if (!isMainFrame) return "continue";
  return policy.allowsUrl(params.request.url) ? "continue" : "block";
}

/** The CDP command that carries out a decision. */
export function decisionCommand(decision: GuardDecision, requestId: string): { method: string; params: object } {
  return decision === "continue"
    ? { method: "Fetch.continueRequest", params: { requestId } }
    : { method: "Fetch.failRequest", params: { requestId, errorReason: "BlockedByClient" } };
}
