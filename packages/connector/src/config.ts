/** How long and how often the connector retries; the same bounds as the Python connector. */
export interface RetryConfig {
  /**
   * Seconds one logical command may take, polls and retries included. When it passes while the
   * command is pending, `OutcomeTimeout` is thrown (the command may still complete); while it is
   * not admitted (busy, unavailable, not started), the last problem is thrown.
   */
  readonly commandTimeout: number;
  /** Seconds a session creation may take, provisioning included. */
  readonly createTimeout: number;
  /** Seconds `close({ wait: true })` waits for the session to become terminal. */
  readonly closeTimeout: number;
  /** Resubmissions of the same command after `504 command_not_started` / `command_timed_out`. */
  readonly resubmitAttempts: number;
  /** Repeats of a request after a network error, only where repeating is safe. */
  readonly networkAttempts: number;
  /** First backoff delay in seconds; it doubles up to `backoffMax`. */
  readonly backoffInitial: number;
  /** Longest backoff delay in seconds. */
  readonly backoffMax: number;
  /** Seconds to wait when a response that asks for a wait has no `Retry-After`. */
  readonly defaultRetryAfter: number;
}

/** The defaults of `RetryConfig`. */
export const DEFAULT_RETRY: RetryConfig = Object.freeze({
  commandTimeout: 60,
  createTimeout: 60,
  closeTimeout: 30,
  resubmitAttempts: 4,
  networkAttempts: 3,
  backoffInitial: 0.5,
  backoffMax: 8,
  defaultRetryAfter: 1,
});

/** The delay before the next attempt after `failures` consecutive failures (1-based). */
export function backoff(retry: RetryConfig, failures: number): number {
  return Math.min(retry.backoffInitial * 2 ** (failures - 1), retry.backoffMax);
}
