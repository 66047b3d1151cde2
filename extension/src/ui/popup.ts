/**
 * Action popup: status at a glance, and the attended attach control. The person picks a tab by
 * opening the popup on it: only the active tab of this window can be attached.
 */
import type { PanelResponse } from "../panel/messages";
import { request } from "./client";
import { byId, showMessage, spawn } from "./dom";
import { renderStatus } from "./status";

const statusBox = byId<HTMLElement>("status");
const message = byId<HTMLElement>("message");
const attachForm = byId<HTMLFormElement>("attach");
const sessionId = byId<HTMLInputElement>("sessionId");
const options = byId<HTMLAnchorElement>("openOptions");

function show(response: PanelResponse): void {
  if (response.status !== undefined) {
    renderStatus(statusBox, response.status, (id) => {
      spawn(request({ type: "detach_session", sessionId: id }).then(show), message);
    });
  }
  if (!response.ok) showMessage(message, response.error, "error");
}

attachForm.addEventListener("submit", (event) => {
  event.preventDefault();
  const attach = chrome.tabs.query({ active: true, currentWindow: true }).then(async ([tab]) => {
    if (tab?.id === undefined) {
      showMessage(message, "No tab to attach in this window.", "error");
      return;
    }
    showMessage(message, "Attaching…", "ok");
    const response = await request({ type: "attach_tab", sessionId: sessionId.value, tabId: tab.id });
    if (response.ok) showMessage(message, "Attached. Closing the session will detach without closing this tab.", "ok");
    show(response);
  });
  spawn(attach, message);
});

options.addEventListener("click", (event) => {
  event.preventDefault();
  spawn(chrome.runtime.openOptionsPage(), message);
});

function refresh(): void {
  spawn(request({ type: "get_status" }).then(show), message);
}

refresh();
setInterval(refresh, 2_000);
