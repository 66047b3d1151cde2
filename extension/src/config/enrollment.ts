/**
 * Enrollment configuration: service origin, enabled state, device id, device credential and local
 * origin policy. It comes from Chrome enterprise policy (chrome.storage.managed, schema in
 * managed_schema.json) when a policy sets it, else from chrome.storage.local, which holds nothing
 * else. The credential leaves this module only towards the Authorization header; the panel sees
 * `credentialSet` and never the value.
 */
import type { StorageArea, StorageApi } from "../chrome/facade";
import type { LocalOriginPolicy } from "@understudy/protocol";
import { canonicalOrigin } from "./origins";

/** The chrome.storage.local key of the enrollment record (the only key the extension writes there). */
export const ENROLLMENT_KEY = "enrollment";

/** chrome.storage.managed keys, as declared in managed_schema.json. */
const MANAGED_KEYS = ["serviceOrigin", "deviceId", "deviceCredential", "enabled", "localOriginPolicy"] as const;

const DEVICE_ID_PATTERN = /^[a-z0-9][a-z0-9._-]{0,63}$/;
const MAX_CREDENTIAL_LENGTH = 512;
const MAX_POLICY_ORIGINS = 256;

export interface EnrollmentConfig {
  readonly serviceOrigin: string;
  readonly enabled: boolean;
  readonly deviceId: string;
  readonly credential: string;
  readonly localOriginPolicy: LocalOriginPolicy;
}

export type ConfigSource = "managed" | "local" | "none";

export interface LoadedEnrollment {
  readonly source: ConfigSource;
  readonly config?: EnrollmentConfig;
  /** Why the configuration in force cannot be used; an actionable sentence. */
  readonly problem?: string;
}

/** What the panel may show about the configuration: everything but the credential. */
export interface EnrollmentView {
  readonly source: ConfigSource;
  readonly serviceOrigin?: string;
  readonly deviceId?: string;
  readonly enabled: boolean;
  readonly credentialSet: boolean;
  readonly localOriginPolicy: LocalOriginPolicy;
  readonly problem?: string;
}

/** Raw input from the options form or a policy; every field untrusted. */
export interface EnrollmentInput {
  readonly serviceOrigin?: unknown;
  readonly enabled?: unknown;
  readonly deviceId?: unknown;
  readonly credential?: unknown;
  readonly localOriginPolicy?: unknown;
}

export type Validation = { ok: true; config: EnrollmentConfig } | { ok: false; problems: string[] };

function parsePolicy(raw: unknown, problems: string[]): LocalOriginPolicy {
  if (raw === undefined) return { mode: "any" };
  if (typeof raw !== "object" || raw === null) {
    problems.push("Local origin policy must be an object with mode 'any' or 'allowlist'.");
    return { mode: "any" };
  }
  const { mode, origins } = raw as { mode?: unknown; origins?: unknown };
  if (mode === "any") return { mode: "any" };
  if (mode !== "allowlist") {
    problems.push("Local origin policy mode must be 'any' or 'allowlist'.");
    return { mode: "any" };
  }
  const list = Array.isArray(origins) ? origins : [];
  const canonical: string[] = [];
  for (const entry of list) {
    const origin = typeof entry === "string" ? canonicalOrigin(entry) : undefined;
    if (origin === undefined) {
      problems.push(
        `Local origin ${JSON.stringify(String(entry)).slice(0, 80)} is not an exact origin; use https://host[:port] (http only on loopback).`,
      );
    } else if (!canonical.includes(origin)) {
      canonical.push(origin);
    }
  }
  if (canonical.length > MAX_POLICY_ORIGINS) problems.push(`The local policy allows at most ${MAX_POLICY_ORIGINS} origins.`);
  canonical.sort();
  return { mode: "allowlist", origins: canonical };
}

/** Validates untrusted input into a configuration, or lists what the operator must fix. */
export function validateEnrollment(input: EnrollmentInput): Validation {
  const problems: string[] = [];
  const serviceOrigin = typeof input.serviceOrigin === "string" ? canonicalOrigin(input.serviceOrigin) : undefined;
  if (serviceOrigin === undefined) {
    problems.push("Service origin must be an exact https:// origin (http:// only on 127.0.0.1 or localhost).");
  }
  const deviceId = typeof input.deviceId === "string" ? input.deviceId.trim() : "";
  if (!DEVICE_ID_PATTERN.test(deviceId)) {
    problems.push("Device id must be 1-64 characters of a-z, 0-9, '.', '_' or '-', starting with a letter or digit.");
  }
  const credential = typeof input.credential === "string" ? input.credential.trim() : "";
  if (credential === "" || credential.length > MAX_CREDENTIAL_LENGTH || /\s/.test(credential)) {
    problems.push("Device credential is missing or malformed; paste the credential the operator CLI printed.");
  }
  const enabled = input.enabled === undefined ? true : input.enabled === true;
  const localOriginPolicy = parsePolicy(input.localOriginPolicy, problems);
  if (problems.length > 0 || serviceOrigin === undefined) return { ok: false, problems };
  return { ok: true, config: { serviceOrigin, enabled, deviceId, credential, localOriginPolicy } };
}

async function readManaged(managed: Pick<StorageArea, "get">): Promise<EnrollmentInput | undefined> {
  let raw: Record<string, unknown>;
  try {
    raw = await managed.get(MANAGED_KEYS);
  } catch {
    // No policy schema support or no policy at all: local configuration applies.
    return undefined;
  }
  if (raw.serviceOrigin === undefined) return undefined;
  return {
    serviceOrigin: raw.serviceOrigin,
    deviceId: raw.deviceId,
    credential: raw.deviceCredential,
    enabled: raw.enabled ?? true,
    localOriginPolicy: raw.localOriginPolicy,
  };
}

/** Loads the configuration in force: enterprise policy first, then the local enrollment. */
export async function loadEnrollment(storage: StorageApi): Promise<LoadedEnrollment> {
  const managed = await readManaged(storage.managed);
  if (managed !== undefined) {
    const result = validateEnrollment(managed);
    return result.ok
      ? { source: "managed", config: result.config }
      : { source: "managed", problem: `Enterprise policy is invalid: ${result.problems.join(" ")}` };
  }
  const stored = (await storage.local.get([ENROLLMENT_KEY]))[ENROLLMENT_KEY];
  if (stored === undefined) return { source: "none", problem: "Not enrolled yet: open the options page and enter the enrollment." };
  const result = validateEnrollment(stored as EnrollmentInput);
  return result.ok
    ? { source: "local", config: result.config }
    : { source: "local", problem: `Stored enrollment is invalid: ${result.problems.join(" ")}` };
}

/**
 * Validates and stores a local enrollment. A blank credential keeps the stored one, because the
 * form never shows the credential again after it was saved.
 */
export async function saveLocalEnrollment(storage: StorageApi, input: EnrollmentInput): Promise<Validation> {
  let credential = input.credential;
  if (typeof credential !== "string" || credential.trim() === "") {
    const stored = (await storage.local.get([ENROLLMENT_KEY]))[ENROLLMENT_KEY] as EnrollmentInput | undefined;
    credential = stored?.credential;
  }
  const result = validateEnrollment({ ...input, credential });
  if (result.ok) await storage.local.set({ [ENROLLMENT_KEY]: { ...result.config } });
  return result;
}

/** The panel's view of a loaded configuration. */
export function viewOf(loaded: LoadedEnrollment): EnrollmentView {
  const config = loaded.config;
  return {
    source: loaded.source,
    enabled: config?.enabled ?? false,
    credentialSet: config !== undefined && config.credential !== "",
    localOriginPolicy: config?.localOriginPolicy ?? { mode: "any" },
    ...(config === undefined ? {} : { serviceOrigin: config.serviceOrigin, deviceId: config.deviceId }),
    ...(loaded.problem === undefined ? {} : { problem: loaded.problem }),
  };
}
