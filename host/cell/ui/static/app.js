// The dashboard's script: opens a payload on request and follows a live
// run's event stream. Everything it shows goes in as text, never as HTML.
"use strict";

function openPayload(button) {
  const row = button.closest("tr");
  const next = row.nextElementSibling;
  if (next && next.classList.contains("payload-row")) {
    next.remove();
    return;
  }
  fetch(button.dataset.payload, { credentials: "same-origin", headers: { Accept: "application/json" } })
    .then((r) => r.json().then((body) => ({ ok: r.ok, body })))
    .then(({ ok, body }) => {
      const tr = document.createElement("tr");
      tr.className = "payload-row";
      const td = document.createElement("td");
      td.colSpan = row.children.length;
      const pre = document.createElement("pre");
      pre.className = "payload";
      if (!ok) {
        pre.textContent = "error: " + body.error + (body.hint ? "\nhint: " + body.hint : "");
      } else {
        const head = body.part + " of entry " + body.seq + ", " + body.size + " bytes" + (body.hash ? ", sha256 " + body.hash : "") + "\n\n";
        pre.textContent = head + (body.cbor || body.text || (body.base64 ? "base64: " + body.base64 : ""));
      }
      td.appendChild(pre);
      tr.appendChild(td);
      row.after(tr);
    });
}

function follow(list) {
  const src = new EventSource(list.dataset.stream);
  const kinds = ["start", "lease", "call", "gate", "denied", "approval", "budget", "chunk", "end", "stdout", "stderr", "log"];
  const add = (text) => {
    const li = document.createElement("li");
    li.textContent = text;
    list.appendChild(li);
    while (list.children.length > 200) list.firstChild.remove();
    list.scrollTop = list.scrollHeight;
  };
  for (const k of kinds) {
    src.addEventListener(k, (ev) => {
      const e = JSON.parse(ev.data);
      const parts = [e.kind, "seq " + e.seq];
      if (e.step) parts.push("step " + e.step);
      for (const f of ["op", "phase", "status", "layer", "reason", "budget", "data"]) if (e[f]) parts.push(e[f]);
      add(parts.join(" · "));
    });
  }
  src.addEventListener("done", (ev) => {
    const d = JSON.parse(ev.data);
    add("the run stopped: " + d.status);
    src.close();
    const st = document.getElementById("status");
    if (st) st.textContent = d.status + " (reload for its journal)";
  });
  src.addEventListener("error", () => {
    if (src.readyState === EventSource.CLOSED) add("the stream closed");
  });
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("button[data-payload]").forEach((b) => b.addEventListener("click", () => openPayload(b)));
  const live = document.getElementById("live");
  if (live) follow(live);
});
