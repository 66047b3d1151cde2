/**
 * Background service worker of the Understudy extension (an ES module, see manifest.json).
 *
 * Everything is wired and every chrome listener registered synchronously in the first turn, so
 * Chrome can wake a stopped worker for any of these events; the async start-up runs after.
 */
import { realChrome } from "./chrome/realChrome";
import { RedactingLogger, consoleSink } from "./log";
import { PanelService } from "./panel/panelService";
import { ProfileClient } from "./profile/profileClient";

const chrome = realChrome();
const log = new RedactingLogger(consoleSink);
const profile = new ProfileClient({
  chrome,
  socketFactory: (url) => new WebSocket(url),
  fetch: (url, init) => fetch(url, init),
  log,
});
const panel = new PanelService(chrome, profile);

chrome.runtime.onMessage((message, reply) => {
  panel
    .handle(message)
    .then(reply)
    .catch(() => {
      reply({ ok: false, error: "The service worker failed to handle the request; see the extension's console." });
    });
});
chrome.runtime.onStartup(() => {
  profile.wake();
});

profile.start().catch(() => {
  log.warn("start_failed");
});
