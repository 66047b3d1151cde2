/**
 * Reconnect delays: exponential with "equal jitter" (half fixed, half random), so a fleet that
 * lost the backend at once does not reconnect in lockstep, and a single device never waits less
 * than half the nominal delay.
 */
import { RECONNECT_BASE_DELAY_MS, RECONNECT_MAX_DELAY_MS } from "../constants";

export interface BackoffOptions {
  readonly baseMs?: number;
  readonly maxMs?: number;
  /** Uniform random in [0, 1); injected so tests can pin the bounds. */
  readonly random?: () => number;
}

/** Delay before reconnect attempt `attempt` (0 = the first retry). */
export function reconnectDelayMs(attempt: number, options: BackoffOptions = {}): number {
  const base = options.baseMs ?? RECONNECT_BASE_DELAY_MS;
  const max = options.maxMs ?? RECONNECT_MAX_DELAY_MS;
  const random = options.random ?? Math.random;
  const nominal = Math.min(max, base * 2 ** Math.min(attempt, 30));
  const half = nominal / 2;
  return Math.round(half + random() * half);
}
