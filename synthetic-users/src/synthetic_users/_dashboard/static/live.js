// The live view of a run: fetch its progress section every few seconds and swap it in.
// Without this script the page refreshes itself (a <noscript> meta refresh); with it, focus and
// scroll stay where the reader left them. Stops when the run has ended.
(function () {
  "use strict";
  var box = document.getElementById("live");
  if (!box) { return; }
  var url = box.getAttribute("data-live-url");
  var every = parseInt(box.getAttribute("data-poll-ms"), 10) || 2000;
  var last = null;
  function done() {
    var section = box.querySelector("section[data-done]");
    return section !== null && section.getAttribute("data-done") === "true";
  }
  function poll() {
    if (done()) { return; }
    fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.text();
      })
      .then(function (html) {
        // Swap only what changed, so a reader's focus and place survive the quiet polls.
        if (html !== last) { last = html; box.innerHTML = html; }
      })
      .catch(function () { /* a missed poll is retried on the next tick */ })
      .then(function () { if (!done()) { window.setTimeout(poll, every); } });
  }
  window.setTimeout(poll, every);
})();
