/**
 * The fields of each frame the backend sends, and of each command, that the extension acts on.
 *
 * The decoder accepts every field the spec declares (@understudy/protocol, generated/frames.ts), so a field added to a
 * frame schema is never a runtime "unknown field" here. It is a compile error instead: the checks
 * at the end of this file fail, naming `frame.field`, until the field is listed below, which is to
 * be done once its handler deals with it (profile/profileClient.ts `onFrame` for device frames,
 * sessions/sessionRuntime.ts `onFrame` and sessions/commandFlow.ts for session frames,
 * commands/index.ts for commands). A field the extension deliberately ignores is listed too,
 * with a comment saying why.
 */
import type { FieldLists, Unlisted } from "@understudy/protocol";
import type { Command, DeviceServerFrame, SessionServerFrame } from "@understudy/protocol";

export const DEVICE_SERVER_HANDLED = {
  welcome: ["deviceId", "protocolVersion", "connectionEpoch", "heartbeatIntervalMs", "serverTime"],
  heartbeat_ack: ["seq", "serverTime"],
  provision: ["leaseId", "sessionId", "leaseEpoch", "allowedOrigins", "deadlineAt"],
  close: ["leaseId", "sessionId", "leaseEpoch", "reason"],
  session_ticket: ["sessionId", "leaseId", "leaseEpoch", "ticket", "socketUrl", "expiresAt"],
  attach_result: ["requestId", "sessionId", "outcome", "leaseId", "leaseEpoch", "allowedOrigins", "error"],
  error: ["code", "message"],
} as const satisfies FieldLists<DeviceServerFrame, "type">;

export const SESSION_SERVER_HANDLED = {
  hello_ack: ["sessionId", "leaseEpoch", "cancel", "unknown", "writesBlocked"],
  read: ["commandId", "command", "deadlineAt"],
  write_prepare: ["commandId", "name", "leaseEpoch", "dryRun", "readyBy"],
  write_grant: ["commandId", "leaseEpoch", "command", "dryRun", "deadlineAt", "secretValue"],
  result_ack: ["commandId"],
  dialog_ack: ["dialogId"],
  cancel: ["commandId", "reason"],
  error: ["code", "message", "commandId"],
} as const satisfies FieldLists<SessionServerFrame, "type">;

export const COMMAND_HANDLED = {
  hello: [],
  get_tabs: [],
  snapshot: ["interactiveOnly", "maxNodes", "format", "changesSince"],
  screenshot: ["format", "quality", "maxWidth"],
  wait_for: ["condition", "timeoutMs"],
  navigate: ["url"],
  go_back: [],
  go_forward: [],
  reload: [],
  click: ["ref", "button", "clickCount", "modifiers"],
  hover: ["ref"],
  drag: ["ref", "targetRef", "dx", "dy", "steps"],
  focus: ["ref"],
  select_text: ["ref", "text", "start", "end"],
  type: ["ref", "text", "submit", "delivery"],
  fill: ["ref", "value"],
  fill_secret: ["ref", "secretRef"],
  press_key: ["key", "modifiers"],
  select_option: ["ref", "values"],
  set_checked: ["ref", "checked"],
  scroll: ["ref", "deltaX", "deltaY"],
  switch_tab: ["tabId"],
} as const satisfies FieldLists<Command, "name">;

// Each compiles only while every field of every frame is listed above; otherwise the compiler
// reports the missing `frame.field` as a missing property.
export const EVERY_DEVICE_FIELD_HANDLED: Record<Unlisted<DeviceServerFrame, "type", typeof DEVICE_SERVER_HANDLED>, never> = {};
export const EVERY_SESSION_FIELD_HANDLED: Record<Unlisted<SessionServerFrame, "type", typeof SESSION_SERVER_HANDLED>, never> = {};
export const EVERY_COMMAND_FIELD_HANDLED: Record<Unlisted<Command, "name", typeof COMMAND_HANDLED>, never> = {};
