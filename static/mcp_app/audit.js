// The audit pages' script. Filter forms leave empty fields out of the URL, so a shared link
// names only the filters in use. Live tail of the call log: while the box is ticked, poll the
// feed for records newer than the newest one shown (same filters) and put them on top. Rows
// are built with textContent only.
"use strict";
(function () {
  for (const form of document.querySelectorAll("form.filters")) {
    form.addEventListener("submit", function () {
      for (const field of form.elements) {
        if (field.name && field.value === "") field.disabled = true;
      }
    });
  }
})();
(function () {
  const table = document.getElementById("calls");
  const toggle = document.getElementById("live-tail");
  const status = document.getElementById("live-status");
  if (!table || !toggle) return;
  const body = table.tBodies[0];
  const maxRows = 500;
  const intervalMs = 2000;
  let newest = Number(table.dataset.newest || 0);
  let timer = null;
  let busy = false;

  function cell(text, className, label) {
    const td = document.createElement("td");
    if (className) td.className = className;
    if (label) td.dataset.label = label;
    td.textContent = text == null ? "" : String(text);
    return td;
  }

  function muted(text, title) {
    const span = document.createElement("span");
    span.className = "muted";
    span.textContent = text;
    if (title) span.title = title;
    return span;
  }

  function rowFor(record) {
    const tr = document.createElement("tr");
    tr.className = "fresh";
    const id = cell("", "", "#");
    const link = document.createElement("a");
    link.href = record.url;
    link.textContent = record.id;
    id.appendChild(link);
    tr.appendChild(id);
    tr.appendChild(cell(record.created_at, "nowrap", "Time"));
    const client = cell("", "client", "Client");
    if (record.client_name) {
      const name = document.createElement("a");
      name.href = record.client_url;
      name.textContent = record.client_name;
      client.appendChild(name);
      if (record.client_version) client.append(" ", muted(record.client_version));
      if (record.client_from_user_agent) {
        client.append(" ", muted("(user agent)", "No clientInfo declared: named by its User-Agent"));
      }
    } else {
      client.appendChild(muted("\u2014"));
    }
    tr.appendChild(client);
    const user = cell(record.user, "user", "User");
    if (record.client_id) {
      user.append(" ", muted("via " + (record.oauth_client_name || record.client_id), "OAuth client " + record.client_id));
    }
    if (!record.user && !record.client_id) user.appendChild(muted("\u2014"));
    tr.appendChild(user);
    tr.appendChild(cell(record.endpoint || "\u2014", "", "Endpoint"));
    const method = cell("", "", "Method");
    const code = document.createElement("code");
    code.textContent = record.method;
    method.appendChild(code);
    tr.appendChild(method);
    const target = cell(record.target, "target", "Tool / target");
    if (record.try_it) {
      const tag = document.createElement("span");
      tag.className = "tag try-it";
      tag.title = "Run from the tool's Try it page in the admin";
      tag.textContent = "try-it";
      target.append(" ", tag);
    }
    tr.appendChild(target);
    const state = cell("", "", "Status");
    const badge = document.createElement("span");
    badge.className = "status " + record.status;
    badge.textContent = record.status_label;
    state.appendChild(badge);
    if (record.http_status >= 400) state.append(" ", muted(String(record.http_status)));
    tr.appendChild(state);
    tr.appendChild(cell(record.duration_ms == null ? "" : record.duration_ms.toFixed(1), "num", "ms"));
    const error = cell(record.error, "error", "Error");
    if (record.error_full) error.title = record.error_full;
    tr.appendChild(error);
    return tr;
  }

  async function poll() {
    if (busy) return;
    busy = true;
    try {
      const url = new URL(table.dataset.feed, window.location.href);
      url.searchParams.set("after", String(newest));
      const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (!response.ok) throw new Error("HTTP " + response.status);
      const data = await response.json();
      const empty = body.querySelector("tr.empty");
      if (data.rows.length && empty) empty.remove();
      // Rows arrive newest first: insert the oldest first so the newest ends on top.
      for (const record of data.rows.slice().reverse()) {
        body.insertBefore(rowFor(record), body.firstChild);
      }
      while (body.rows.length > maxRows) body.deleteRow(body.rows.length - 1);
      newest = Math.max(newest, data.latest);
      status.textContent = "Live: updated " + data.updated;
    } catch (error) {
      status.textContent = "Live tail paused: " + error.message;
    } finally {
      busy = false;
    }
  }

  toggle.addEventListener("change", function () {
    if (toggle.checked) {
      poll();
      timer = window.setInterval(poll, intervalMs);
    } else {
      window.clearInterval(timer);
      timer = null;
      status.textContent = "";
    }
  });
})();
(function () {
  // The statistics page reloads itself while visible, so a screen left open stays current.
  const head = document.getElementById("stats-head");
  const seconds = head ? Number(head.dataset.refreshSeconds || 0) : 0;
  if (!seconds) return;
  window.setInterval(function () {
    if (document.visibilityState === "visible") window.location.reload();
  }, seconds * 1000);
})();
