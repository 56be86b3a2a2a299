// numtune dashboard: live updates without a framework. Any element with data-poll="URL"
// gets its inner HTML replaced by that URL's fragment every POLL_MS; it stops once the
// fragment carries data-terminal (the job ended) or the element has data-done. A 401
// means the session ended: reload, and the server sends the browser to the login page.
"use strict";
const POLL_MS = 1500;

function poll(el) {
  const url = el.dataset.poll;
  const tick = async () => {
    if (el.hasAttribute("data-done")) return;
    try {
      const r = await fetch(url, { headers: { "X-Requested-With": "fetch" }, credentials: "same-origin" });
      if (r.status === 401) { window.location.reload(); return; }
      if (r.ok) {
        const html = await r.text();
        // Keep the user's scroll position in the log while it grows.
        const log = el.querySelector("pre.log");
        const atBottom = !log || log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
        el.innerHTML = html;
        const fresh = el.querySelector("pre.log");
        if (fresh && atBottom) fresh.scrollTop = fresh.scrollHeight;
        if (el.querySelector("[data-terminal]")) {
          el.setAttribute("data-done", "");
          const cancel = document.getElementById("cancel-form");
          if (cancel) cancel.remove();
          return;
        }
      }
    } catch (e) { /* the server restarting: try again next tick */ }
    setTimeout(tick, POLL_MS);
  };
  setTimeout(tick, POLL_MS);
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-poll]").forEach(poll);
  document.querySelectorAll("pre.log").forEach((p) => { p.scrollTop = p.scrollHeight; });
  // Cancelling is not undoable: ask first (the server needs no script for it).
  const cancel = document.getElementById("cancel-form");
  if (cancel) cancel.addEventListener("submit", (e) => {
    if (!window.confirm("Cancel this job?")) e.preventDefault();
  });
});
