/**
 * Messages between the extension's own pages (options, action popup) and the service worker.
 * The status never carries the credential, URLs or titles; only ids, states and counters.
 */
import type { EnrollmentView } from "../config/enrollment";
import type { ConnectionState } from "../profile/profileClient";
import type { HealthCounterName } from "../profile/health";
import type { RuntimeView } from "../sessions/sessionRuntime";

export interface EnrollmentForm {
  readonly serviceOrigin: string;
  readonly deviceId: string;
  /** Blank keeps the stored credential. */
  readonly credential: string;
  readonly enabled: boolean;
  readonly policyMode: "any" | "allowlist";
  readonly policyOrigins: readonly string[];
}

export type PanelRequest =
  | { readonly type: "get_status" }
  | { readonly type: "save_enrollment"; readonly form: EnrollmentForm }
  | { readonly type: "set_enabled"; readonly enabled: boolean }
  | { readonly type: "attach_tab"; readonly sessionId: string; readonly tabId: number }
  | { readonly type: "detach_session"; readonly sessionId: string };

export interface PanelStatus {
  readonly connection: ConnectionState;
  readonly lastError?: string;
  readonly browserEpoch?: string;
  readonly connectionEpoch?: number;
  readonly enrollment: EnrollmentView;
  readonly sessions: readonly RuntimeView[];
  readonly capacity: { readonly total: number; readonly free: number };
  readonly health: Partial<Record<HealthCounterName, number>>;
  /** Whether the extension may fetch from the service origin (undefined when not enrolled). */
  readonly hostPermission?: boolean;
}

export type PanelResponse =
  | { readonly ok: true; readonly status: PanelStatus }
  | { readonly ok: false; readonly error: string; readonly status?: PanelStatus };
