/**
 * Every error the connector throws. Three families keep misuse, bad data and remote failures
 * apart; branch on the class (`instanceof`), never on the message:
 *
 *     UnderstudyError
 *     ├── UsageError                  the caller misused the connector
 *     │   └── SessionClosedError      this Session ended or was closed; create a new session
 *     ├── ResponseValidationError     a response did not match spec/openapi.yaml
 *     ├── BackendUnreachable          the network failed on every attempt
 *     ├── Aborted                     the caller's AbortSignal fired
 *     ├── WriteRefused                the approval hook refused a write; nothing was sent
 *     ├── CommandFailed               a durable outcome with status `failed` (carries its code)
 *     ├── OutcomeTimeout              still pending when the caller's timeout passed; poll it
 *     ├── ProvisioningTimeout         the session was still provisioning at the timeout
 *     ├── CloseTimeout                close({ wait: true }): still closing at the timeout
 *     └── ProblemError                an RFC 9457 problem: status, code, detail, ...
 *         └── one class per documented problem code (`PROBLEM_CLASSES`)
 *
 * A problem code this connector does not know yet becomes a plain `ProblemError`, so a newer
 * backend never breaks an older connector.
 */
import type { CommandOutcome, Problem, SessionTombstone } from "@understudy/protocol";
import { SPEC_PROBLEM_CODES } from "@understudy/protocol";

/** Base class of every error the connector throws. */
export class UnderstudyError extends Error {
  override name = "UnderstudyError";
}

/** The caller misused the connector: invalid arguments, a hook of the wrong kind, and so on. */
export class UsageError extends UnderstudyError {
  override name = "UsageError";
}

/** The Session ended (`410`) or was closed; nothing was sent. Create a new session. */
export class SessionClosedError extends UsageError {
  override name = "SessionClosedError";
}

/** A response did not match spec/openapi.yaml. */
export class ResponseValidationError extends UnderstudyError {
  override name = "ResponseValidationError";
  constructor(
    message: string,
    readonly operation: string,
    readonly status: number,
  ) {
    super(`${operation}: HTTP ${status}: ${message}`);
  }
}

/**
 * The backend could not be reached on any attempt. For a command, `commandId` is set: it may have
 * been admitted before the connection dropped. Poll it, or resubmit it with the same id.
 */
export class BackendUnreachable extends UnderstudyError {
  override name = "BackendUnreachable";
  constructor(
    message: string,
    readonly commandId?: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/**
 * The caller's `AbortSignal` fired. For a command, `commandId` is set: a request already sent may
 * have been admitted, so poll that id (or resubmit it with the same id) to learn its outcome.
 */
export class Aborted extends UnderstudyError {
  override name = "Aborted";
  constructor(
    message: string,
    readonly commandId?: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** The consumer's approval hook refused a write; the write was not sent. */
export class WriteRefused extends UnderstudyError {
  override name = "WriteRefused";
  constructor(
    readonly command: string,
    readonly commandId: string,
  ) {
    super(`${command} was refused by the approval hook; it was not sent`);
  }
}

/** The command reached a durable outcome with status `failed`; `code` says why. */
export class CommandFailed extends UnderstudyError {
  override name = "CommandFailed";
  readonly commandId: string;
  readonly command: string;
  readonly code: string;
  readonly detail: string;
  constructor(readonly outcome: CommandOutcome) {
    const code = outcome.error?.code ?? "unknown_error";
    const detail = outcome.error?.message ?? "no error given";
    super(`${outcome.name} failed (${code}): ${detail}`);
    this.commandId = outcome.commandId;
    this.command = outcome.name;
    this.code = code;
    this.detail = detail;
  }
}

/**
 * The caller's timeout passed while the command was still pending or granted. It may still
 * complete: poll `commandId` (`Client.pollCommand`); never resubmit it under a new id.
 */
export class OutcomeTimeout extends UnderstudyError {
  override name = "OutcomeTimeout";
  constructor(
    readonly command: string,
    readonly commandId: string,
    readonly timeout: number,
  ) {
    super(
      `${command} ${commandId} was still pending after ${timeout} s; it may still complete, ` +
        "poll it with the same command id",
    );
  }
}

/** The session was still provisioning when the creation timeout passed; it exists: delete it. */
export class ProvisioningTimeout extends UnderstudyError {
  override name = "ProvisioningTimeout";
  constructor(
    readonly sessionId: string,
    readonly timeout: number,
  ) {
    super(`session ${sessionId} was still provisioning after ${timeout} s`);
  }
}

/** `close({ wait: true })`: the session was still not terminal when the timeout passed. */
export class CloseTimeout extends UnderstudyError {
  override name = "CloseTimeout";
  constructor(
    readonly sessionId: string,
    readonly timeout: number,
    readonly status: string,
  ) {
    super(`session ${sessionId} was still ${status} after ${timeout} s`);
  }
}

/** An RFC 9457 problem returned by the backend. */
export class ProblemError extends UnderstudyError {
  override name = "ProblemError";
  /** The documented code of this class; `undefined` on the plain class. */
  static readonly CODE: string | undefined = undefined;
  /** The HTTP status of that code. */
  static readonly STATUS: number | undefined = undefined;
  readonly status: number;
  readonly code: string;
  readonly detail: string | undefined;
  /** On command problems, the command concerned. */
  commandId: string | undefined;

  constructor(
    readonly problem: Problem,
    /** Seconds from `Retry-After`, when the response carried one. */
    readonly retryAfter?: number,
  ) {
    const where = problem.commandId === undefined ? "" : ` (command ${problem.commandId})`;
    super(`${problem.status} ${problem.code}: ${problem.detail ?? problem.title}${where}`);
    this.status = problem.status;
    this.code = problem.code;
    this.detail = problem.detail;
    this.commandId = problem.commandId;
  }
}

/** A problem class: its documented `code` and `status`, and how to build one. */
export type ProblemClass = (new (problem: Problem, retryAfter?: number) => ProblemError) & {
  readonly CODE: string | undefined;
  readonly STATUS: number | undefined;
};

/** The request is malformed or breaks a documented rule; `problem.errors` names the fields. */
export class InvalidRequest extends ProblemError {
  static override readonly CODE: string | undefined = "invalid_request";
  static override readonly STATUS: number | undefined = 400;
  override name = "InvalidRequest";
}

/** The API key is missing, unknown or revoked. */
export class Unauthorized extends ProblemError {
  static override readonly CODE: string | undefined = "unauthorized";
  static override readonly STATUS: number | undefined = 401;
  override name = "Unauthorized";
}

/** Unattended sessions are not enabled for this tenant. */
export class UnattendedDisabled extends ProblemError {
  static override readonly CODE: string | undefined = "unattended_disabled";
  static override readonly STATUS: number | undefined = 403;
  override name = "UnattendedDisabled";
}

/** No operator token exists on the backend. */
export class OperatorApiDisabled extends ProblemError {
  static override readonly CODE: string | undefined = "operator_api_disabled";
  static override readonly STATUS: number | undefined = 403;
  override name = "OperatorApiDisabled";
}

/** The explicit device is not enrolled in this tenant; there is no fallback. */
export class DeviceNotFound extends ProblemError {
  static override readonly CODE: string | undefined = "device_not_found";
  static override readonly STATUS: number | undefined = 404;
  override name = "DeviceNotFound";
}

/** The tenant's vault holds no secret of this name. */
export class SecretNotFound extends ProblemError {
  static override readonly CODE: string | undefined = "secret_not_found";
  static override readonly STATUS: number | undefined = 404;
  override name = "SecretNotFound";
}

/** No such session in this tenant. */
export class SessionNotFound extends ProblemError {
  static override readonly CODE: string | undefined = "session_not_found";
  static override readonly STATUS: number | undefined = 404;
  override name = "SessionNotFound";
}

/** No such command in this session. */
export class CommandNotFound extends ProblemError {
  static override readonly CODE: string | undefined = "command_not_found";
  static override readonly STATUS: number | undefined = 404;
  override name = "CommandNotFound";
}

/** The device id is already enrolled (or was revoked) in the tenant. */
export class DeviceExists extends ProblemError {
  static override readonly CODE: string | undefined = "device_exists";
  static override readonly STATUS: number | undefined = 409;
  override name = "DeviceExists";
}

/** The idempotency key was used with a different creation request. */
export class IdempotencyConflict extends ProblemError {
  static override readonly CODE: string | undefined = "idempotency_conflict";
  static override readonly STATUS: number | undefined = 409;
  override name = "IdempotencyConflict";
}

/** The origins overlap a live session on the device, or fall outside its local policy. */
export class OriginConflict extends ProblemError {
  static override readonly CODE: string | undefined = "origin_conflict";
  static override readonly STATUS: number | undefined = 409;
  override name = "OriginConflict";
}

/** The profile-state key is already live on the requested device. */
export class ProfileConflict extends ProblemError {
  static override readonly CODE: string | undefined = "profile_conflict";
  static override readonly STATUS: number | undefined = 409;
  override name = "ProfileConflict";
}

/**
 * A side effect may have happened. Never retried: inspect the page with a read instead. Further
 * writes on the session are blocked; delete it and create a new one to write again.
 */
export class CommandOutcomeUnknown extends ProblemError {
  static override readonly CODE: string | undefined = "command_outcome_unknown";
  static override readonly STATUS: number | undefined = 409;
  override name = "CommandOutcomeUnknown";
}

/** The command id was already used for a different request; a new request needs a new id. */
export class CommandIdConflict extends ProblemError {
  static override readonly CODE: string | undefined = "command_id_conflict";
  static override readonly STATUS: number | undefined = 409;
  override name = "CommandIdConflict";
}

/** Writes on this session are blocked; reads still work. */
export class WritesBlocked extends ProblemError {
  static override readonly CODE: string | undefined = "writes_blocked";
  static override readonly STATUS: number | undefined = 409;
  override name = "WritesBlocked";
}

/** The session is closing or ended; create a new session. */
export class SessionTerminal extends ProblemError {
  static override readonly CODE: string | undefined = "session_terminal";
  static override readonly STATUS: number | undefined = 410;
  override name = "SessionTerminal";
  /** How the session ended, when the backend answered with its tombstone. */
  tombstone: SessionTombstone | undefined;
}

/** The extension lacks the safe-write protocol; writes cannot run. Update the extension. */
export class ProtocolUpgradeRequired extends ProblemError {
  static override readonly CODE: string | undefined = "protocol_upgrade_required";
  static override readonly STATUS: number | undefined = 426;
  override name = "ProtocolUpgradeRequired";
}

/** Every compatible online device is full; retry after `retryAfter` with the same key. */
export class CapacityExhausted extends ProblemError {
  static override readonly CODE: string | undefined = "capacity_exhausted";
  static override readonly STATUS: number | undefined = 429;
  override name = "CapacityExhausted";
}

/** A quota was exceeded; retry after `retryAfter`. */
export class RateLimited extends ProblemError {
  static override readonly CODE: string | undefined = "rate_limited";
  static override readonly STATUS: number | undefined = 429;
  override name = "RateLimited";
}

/** Another command owns the session's admission slot. */
export class SessionBusy extends ProblemError {
  static override readonly CODE: string | undefined = "session_busy";
  static override readonly STATUS: number | undefined = 429;
  override name = "SessionBusy";
}

/** No compatible device is online; retry later with the same idempotency key. */
export class NoDeviceAvailable extends ProblemError {
  static override readonly CODE: string | undefined = "no_device_available";
  static override readonly STATUS: number | undefined = 503;
  override name = "NoDeviceAvailable";
}

/** The tab's connection is down; retry after `retryAfter`. */
export class SessionUnavailable extends ProblemError {
  static override readonly CODE: string | undefined = "session_unavailable";
  static override readonly STATUS: number | undefined = 503;
  override name = "SessionUnavailable";
}

/** The service is starting or draining. */
export class NotReady extends ProblemError {
  static override readonly CODE: string | undefined = "not_ready";
  static override readonly STATUS: number | undefined = 503;
  override name = "NotReady";
}

/** The service cannot reach its database (a `/readyz` answer): route traffic elsewhere. */
export class DatabaseUnavailable extends NotReady {
  static override readonly CODE: string | undefined = "database_unavailable";
  override name = "DatabaseUnavailable";
}

/** The database is at another schema version than the service's build: migrate, or roll back. */
export class SchemaNotCurrent extends NotReady {
  static override readonly CODE: string | undefined = "schema_not_current";
  override name = "SchemaNotCurrent";
}

/** The backend gave up before the grant; nothing ran. Retrying the same id is safe. */
export class CommandNotStarted extends ProblemError {
  static override readonly CODE: string | undefined = "command_not_started";
  static override readonly STATUS: number | undefined = 504;
  override name = "CommandNotStarted";
}

/** A read timed out; retrying the same id is safe. */
export class CommandTimedOut extends ProblemError {
  static override readonly CODE: string | undefined = "command_timed_out";
  static override readonly STATUS: number | undefined = 504;
  override name = "CommandTimedOut";
}

const CLASSES: readonly ProblemClass[] = [
  InvalidRequest,
  Unauthorized,
  UnattendedDisabled,
  OperatorApiDisabled,
  DeviceNotFound,
  SecretNotFound,
  SessionNotFound,
  CommandNotFound,
  DeviceExists,
  IdempotencyConflict,
  OriginConflict,
  ProfileConflict,
  CommandOutcomeUnknown,
  CommandIdConflict,
  WritesBlocked,
  SessionTerminal,
  ProtocolUpgradeRequired,
  CapacityExhausted,
  RateLimited,
  SessionBusy,
  NoDeviceAvailable,
  SessionUnavailable,
  NotReady,
  DatabaseUnavailable,
  SchemaNotCurrent,
  CommandNotStarted,
  CommandTimedOut,
];

/** The class thrown for each problem code this connector knows, by code. */
export const PROBLEM_CLASSES: ReadonlyMap<string, ProblemClass> = new Map(
  CLASSES.map((cls) => [cls.CODE as string, cls]),
);

/** Every problem code that spec/openapi.yaml documents. */
export const DOCUMENTED_PROBLEM_CODES: ReadonlySet<string> = new Set(SPEC_PROBLEM_CODES);

/** The class of a problem code; `ProblemError` itself for a code unknown to this connector. */
export function problemClassOf(code: string): ProblemClass {
  return PROBLEM_CLASSES.get(code) ?? ProblemError;
}
