/**
 * Error families of the extension.
 *
 *   Error
 *   ├── CommandError          a command failed; carries a spec `CommandErrorCode` for the caller
 *   ├── StaleAuthorityError   the lease, browser epoch or runtime changed under an operation
 *   └── ConfigError           enrollment configuration is missing or invalid (operator must fix)
 */
import type { CommandErrorCode, ErrorInfo } from "@understudy/protocol";

/** A command failed in a way the caller can act on. The message says what to do next. */
export class CommandError extends Error {
  override readonly name = "CommandError";

  constructor(
    readonly code: CommandErrorCode,
    message: string,
  ) {
    super(message);
  }

  toErrorInfo(): ErrorInfo {
    return { code: this.code, message: this.message.slice(0, 2048) };
  }
}

/** The authority an operation started under is gone; the operation must stop without effect. */
export class StaleAuthorityError extends Error {
  override readonly name = "StaleAuthorityError";
}

/** Enrollment configuration is missing or invalid. */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

/** Converts anything thrown by a command into the ErrorInfo sent to the backend. */
export function toErrorInfo(error: unknown): ErrorInfo {
  if (error instanceof CommandError) return error.toErrorInfo();
  // CDP and chrome.* errors carry protocol text only (never command arguments), but the message
  // is still bounded and generic so nothing page- or secret-derived can leak through it.
  return { code: "cdp_error", message: "The browser refused the operation; take a new snapshot and retry." };
}
