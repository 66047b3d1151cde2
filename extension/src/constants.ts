/**
 * Timing and size limits shared by the service worker's parts. Units are in the names. The numbers
 * the backend shares (heartbeat, tab capacity, outbox and journal bounds, screenshot size) come
 * from the spec (@understudy/protocol, generated/protocol.ts), re-exported here under the names the parts use.
 */
import { HEARTBEAT_INTERVAL_MS, MAX_SCREENSHOT_CHARS } from "@understudy/protocol";

export {
  DEVICE_TAB_CAPACITY,
  DIALOG_OUTBOX_MAX_BYTES,
  DIALOG_OUTBOX_MAX_RECORDS,
  HEARTBEAT_INTERVAL_MS,
  WRITE_JOURNAL_MAX_ENTRIES,
} from "@understudy/protocol";

/** Chrome's idle timeout for an extension service worker, measured on Chromium 156. */
export const SERVICE_WORKER_IDLE_TIMEOUT_MS = 30_000;

/** Reconnect once three heartbeats in a row went unacknowledged (before DEVICE_OFFLINE_AFTER_MS). */
export const HEARTBEAT_ACK_TIMEOUT_MS = 3 * HEARTBEAT_INTERVAL_MS;

/** First reconnect delay; doubles per failed attempt. */
export const RECONNECT_BASE_DELAY_MS = 1_000;

/**
 * Longest reconnect delay. Kept well under the backend's recovery grace (RECOVERY_GRACE_MS), so a
 * device that comes back reconnects before its leases are declared lost.
 */
export const RECONNECT_MAX_DELAY_MS = 30_000;

/**
 * How many `ticket_request` frames a runtime sends in a row, spaced by the reconnect backoff,
 * after its session socket dropped while the device socket stayed up. A successful session hello
 * resets the count; past it, the next device-socket reconnect brings a fresh ticket.
 */
export const SESSION_TICKET_MAX_REQUESTS = 6;

/** Name and period of the alarm that wakes a stopped service worker to reconnect. */
export const KEEPALIVE_ALARM_NAME = "understudy-keepalive";
export const KEEPALIVE_ALARM_PERIOD_MINUTES = 0.5;

/** Poll interval of `wait_for`. */
export const WAIT_POLL_INTERVAL_MS = 100;

/** Default and bounds of `wait_for` (spec: 100..15000, default 5000). */
export const WAIT_DEFAULT_TIMEOUT_MS = 5_000;

/** How long a navigation command waits for the load event before it answers anyway. */
export const NAVIGATION_LOAD_TIMEOUT_MS = 10_000;

/** Screenshot data bound (spec: ScreenshotResult.data maxLength). */
export const SCREENSHOT_MAX_BASE64_CHARS = MAX_SCREENSHOT_CHARS;

/** Default snapshot node bound (spec default 1000, maximum 5000). */
export const SNAPSHOT_DEFAULT_MAX_NODES = 1_000;

/** How long the panel's attach request waits for the backend's `attach_result`. */
export const ATTACH_RESULT_TIMEOUT_MS = 10_000;

/** Chrome DevTools Protocol version requested from chrome.debugger. */
export const CDP_PROTOCOL_VERSION = "1.3";

/** Socket protocol this extension speaks on session sockets. */
export const SESSION_PROTOCOL_VERSION = 2;

/**
 * After a write that activates the page (a click, a key press, a changed select or checkbox) acted,
 * how long the page's reaction (a navigation, a redirect, a popup) is still attributed to it,
 * counted from the end of a round trip through the page's task queue (which has then run its
 * handlers and what they scheduled with no delay). Popups are reported ~15 ms after the input on
 * Chromium 156, and the round trip itself takes several: the popup suite attributes every kind
 * with 15 ms (twice in a row on a loaded machine), where 250 ms charged every click a quarter
 * second. It is waited only when the page gave a sign of a reaction during the write (a window
 * opened, a navigation requested or started, a target attached, a popup's tab event) or the tab
 * holds a frame of another process, whose signs report on that frame's own session
 * (SessionRuntime.settleWindow); otherwise no report can follow and a click pays nothing for it.
 * A write that loads a document gets only the round trip, and typing, filling and
 * scrolling only wait for a navigation already under way (commandFlow.ts `SETTLE_OF`). What the
 * page does later is still in the session status, only not in the command's outcome.
 */
export const BLOCK_SETTLE_MS = 15;
/** The page round trip of the settle window is given up after this long (a page may hang its queue). */
export const BLOCK_SETTLE_PAGE_MS = 250;
export const BLOCK_SETTLE_MAX_MS = 2_000;

/**
 * How long `select_text` waits for the page to see its selection: the event a selection fires
 * (`select` on a text field, `selectionchange` on the document) is a queued task, and the page's
 * own listeners of it run before the command answers, so the next snapshot reads what they did.
 * A selection that did not change fires no event; this bounds the wait then.
 */
export const SELECT_EVENT_WAIT_MS = 50;

/**
 * A tab someone else opened while the popup fence was up, whose first main-frame request the fence
 * refused within this long of its creation, is reloaded once the fence spares it (the request
 * raced `tabs.onCreated`; see sessions/popupFence.ts).
 */
export const FENCE_REPAIR_WINDOW_MS = 5_000;
