/**
 * Origin canonicalisation and the origin policy of one session: the session's `allowedOrigins`
 * intersected with the device's local origin policy. The policy constrains top-level navigation
 * only; subresources and iframes are not filtered (this is not an egress firewall).
 */
import type { LocalOriginPolicy } from "@understudy/protocol";

/** The internal page every new tab starts on; always permitted. */
export const ABOUT_BLANK = "about:blank";

/** Whether a hostname is a loopback address (where plain HTTP is accepted for development). */
export function isLoopbackHost(hostname: string): boolean {
  if (hostname === "localhost" || hostname === "[::1]") return true;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname);
}

/**
 * Canonicalises an exact origin (`https://host[:port]`, or `http://` on loopback) the way the
 * backend does (URL.origin: lower-case scheme and host, default port dropped). Returns undefined
 * for anything that is not exactly an origin: paths, queries, fragments, credentials, wildcards.
 */
export function canonicalOrigin(input: string): string | undefined {
  const trimmed = input.trim();
  if (trimmed.includes("*")) return undefined;
  let url: URL;
  try {
    url = new URL(trimmed);
  } catch {
    return undefined;
  }
  if (url.username !== "" || url.password !== "" || url.search !== "" || url.hash !== "") return undefined;
  if (url.pathname !== "/" || /^[a-z]+:\/\/[^/]+\/./i.test(trimmed)) return undefined;
  if (url.protocol === "https:") return url.origin;
  if (url.protocol === "http:" && isLoopbackHost(url.hostname)) return url.origin;
  return undefined;
}

/** The origin of a URL a tab may navigate to, or undefined for opaque ones (data:, file:, …). */
export function originOfUrl(url: string): string | undefined {
  try {
    const parsed = new URL(url);
    if (parsed.protocol !== "https:" && parsed.protocol !== "http:") return undefined;
    return parsed.origin;
  } catch {
    return undefined;
  }
}

/** Whether the local policy admits one canonical origin. */
export function localPolicyAdmits(policy: LocalOriginPolicy, origin: string): boolean {
  if (policy.mode === "any") return true;
  return (policy.origins ?? []).includes(origin);
}

/** The navigation policy of one session. */
export class OriginPolicy {
  private readonly sessionOrigins: ReadonlySet<string> | undefined;

  /**
   * @param allowedOrigins the session's exact origins; undefined when the session sets none
   *   (an attended session without a list), which leaves only the local policy.
   * @param local the device operator's local origin policy.
   */
  constructor(
    allowedOrigins: readonly string[] | undefined,
    private readonly local: LocalOriginPolicy,
  ) {
    this.sessionOrigins =
      allowedOrigins === undefined
        ? undefined
        : new Set(allowedOrigins.map(canonicalOrigin).filter((o): o is string => o !== undefined));
  }

  /** Whether a top-level navigation to `url` is permitted. */
  allowsUrl(url: string): boolean {
    if (url === ABOUT_BLANK) return true;
    const origin = originOfUrl(url);
    if (origin === undefined) return false;
    if (this.sessionOrigins !== undefined && !this.sessionOrigins.has(origin)) return false;
    return localPolicyAdmits(this.local, origin);
  }

  /** The session's origin list, for persistence. */
  get allowedOrigins(): string[] | undefined {
    return this.sessionOrigins === undefined ? undefined : [...this.sessionOrigins];
  }
}
