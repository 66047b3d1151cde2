/** Renders the connection, epoch, sessions and health parts of PanelStatus (shared by both pages). */
import type { PanelStatus } from "../panel/messages";
import { el } from "./dom";

const CONNECTION_LABELS: Readonly<Record<PanelStatus["connection"], string>> = {
  starting: "Starting",
  unconfigured: "Not enrolled",
  disabled: "Disabled",
  connecting: "Connecting",
  online: "Online",
  backoff: "Reconnecting",
  unauthorized: "Credential refused",
};

function row(table: HTMLElement, label: string, value: string): void {
  const tr = el("tr");
  tr.append(el("th", label), el("td", value));
  table.append(tr);
}

export function renderStatus(container: HTMLElement, status: PanelStatus, onDetach?: (sessionId: string) => void): void {
  container.replaceChildren();
  const table = el("table", undefined, "facts");
  row(table, "Connection", CONNECTION_LABELS[status.connection] + (status.lastError === undefined ? "" : ` (${status.lastError})`));
  row(table, "Configuration", status.enrollment.source === "managed" ? "Enterprise policy" : status.enrollment.source === "local" ? "This browser (options page)" : "None");
  if (status.enrollment.deviceId !== undefined) row(table, "Device", status.enrollment.deviceId);
  if (status.enrollment.serviceOrigin !== undefined) row(table, "Service", status.enrollment.serviceOrigin);
  if (status.hostPermission === false) {
    const fix = status.enrollment.source === "managed" ? "set this extension's Site access in chrome://extensions to On all sites." : "save the options again and allow it, or set this extension's Site access in chrome://extensions to On all sites.";
    row(table, "Permission", `Missing for the service origin: ${fix}`);
  }
  row(table, "Browser epoch", status.browserEpoch ?? "—");
  if (status.connectionEpoch !== undefined) row(table, "Connection epoch", String(status.connectionEpoch));
  row(table, "Capacity", `${status.capacity.free} of ${status.capacity.total} tabs free`);
  const counters = Object.entries(status.health).map(([name, count]) => `${name} ${count}`);
  row(table, "Health", counters.length === 0 ? "No events" : counters.join(", "));
  if (status.enrollment.problem !== undefined) row(table, "Problem", status.enrollment.problem);
  container.append(table);

  container.append(el("h2", "Controlled sessions"));
  if (status.sessions.length === 0) {
    container.append(el("p", "No tab is controlled.", "muted"));
    return;
  }
  const sessions = el("table", undefined, "sessions");
  const head = el("tr");
  for (const title of ["Session", "Mode", "Tab", "Socket", "Writes", ""]) head.append(el("th", title));
  sessions.append(head);
  for (const session of status.sessions) {
    const tr = el("tr");
    tr.append(
      el("td", session.sessionId, "mono"),
      el("td", session.mode),
      el("td", String(session.tabId)),
      el("td", session.socketConnected ? "connected" : "waiting"),
      el("td", session.writesBlocked ? "blocked" : `${session.journal} in journal`),
    );
    const actions = el("td");
    if (session.mode === "attended" && onDetach !== undefined) {
      const button = el("button", "Detach");
      button.type = "button";
      button.addEventListener("click", () => {
        onDetach(session.sessionId);
      });
      actions.append(button);
    }
    tr.append(actions);
    sessions.append(tr);
  }
  container.append(sessions);
}
