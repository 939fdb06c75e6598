// SmartGo console: the small library the pages are built with. No build
// step and no third-party code: DOM helpers, the API client, a sortable
// and filterable table, a canvas line chart, dialogs and notices.
(function () {
"use strict";

const SG = {};

// h builds an element: h("a", {href: "#", class: "x", onclick: fn}, "text", child...).
// Text always goes in as text (never as HTML), so names from the cluster
// cannot inject markup.
SG.h = function (tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k === "value") el.value = v;
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
};
const h = SG.h;

// Formatting.
SG.num = (v) => (v === undefined || v === null || v < 0 ? "-" : Number(v).toLocaleString("en-US"));
SG.rate = (v) => (v === undefined || v === null ? "-" : v >= 100 ? Math.round(v).toLocaleString("en-US") : Number(v).toFixed(v >= 10 ? 1 : 2));
SG.bytes = function (v) {
  if (v === undefined || v === null || v < 0) return "-";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return (i ? v.toFixed(1) : v) + " " + u[i];
};
SG.time = (ms) => (ms > 0 ? new Date(ms).toLocaleString() : "-");
// An RFC 3339 time of the twin API; its "never" (0001-01-01T00:00:00Z) is "-".
SG.isoTime = (s) => SG.time(Date.parse(s || ""));
SG.ago = function (ms) {
  if (!(ms > 0)) return "-";
  let s = Math.max(0, Math.floor((Date.now() - ms) / 1000));
  const d = Math.floor(s / 86400); s %= 86400;
  const hh = Math.floor(s / 3600); s %= 3600;
  const m = Math.floor(s / 60); s %= 60;
  return d ? d + "d " + hh + "h" : hh ? hh + "h " + m + "m" : m ? m + "m " + s + "s" : s + "s";
};
SG.pct = (r) => (r === undefined || r === null || r < 0 ? "-" : (r * 100).toFixed(1) + " %");
SG.perm = (p) => ({ 6: "read+write", 4: "read", 2: "write" })[p] || String(p);

// The API client. Changes carry the session's CSRF token; a 401 sends the
// user back to the login form.
SG.session = null;
SG.onUnauthorized = null;
SG.api = async function (method, path, body) {
  const opts = { method, headers: { Accept: "application/json" }, credentials: "same-origin" };
  if (method !== "GET") {
    opts.headers["X-CSRF-Token"] = SG.session ? SG.session.csrf : "";
    if (body !== undefined) {
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
  }
  const resp = await fetch(path, opts);
  let data = null;
  try { data = await resp.json(); } catch (e) { data = null; }
  if (resp.status === 401 && path !== "/api/login" && SG.onUnauthorized) SG.onUnauthorized();
  if (!resp.ok) {
    const err = new Error((data && data.error) || resp.status + " " + resp.statusText);
    err.status = resp.status;
    throw err;
  }
  // Built from the brokers that answered while others did not: the
  // pages show why next to what they got.
  const part = resp.headers.get("X-SmartGo-Partial");
  if (part && data && typeof data === "object") data.partial = part;
  return data;
};
SG.get = (path) => SG.api("GET", path);
SG.qs = (o) => Object.entries(o).filter(([, v]) => v !== undefined && v !== null && v !== "")
  .map(([k, v]) => encodeURIComponent(k) + "=" + encodeURIComponent(v)).join("&");
SG.isAdmin = () => SG.session && SG.session.role === "admin";

// Notices.
SG.toast = function (msg, bad) {
  const t = h("div", { class: "toast" + (bad ? " bad" : ""), role: "status" }, msg);
  document.getElementById("toasts").append(t);
  setTimeout(() => t.remove(), bad ? 8000 : 4000);
};
SG.fail = (e) => SG.toast(e.message || String(e), true);

// Dialogs: SG.dialog(title, body nodes, [buttons]) resolves with the
// pressed button's value (false on Escape or Cancel).
SG.dialog = function (title, body, buttons) {
  const box = document.getElementById("dialog");
  return new Promise((resolve) => {
    const close = (v) => { box.hidden = true; box.replaceChildren(); document.removeEventListener("keydown", onKey); resolve(v); };
    const onKey = (e) => { if (e.key === "Escape") close(false); };
    document.addEventListener("keydown", onKey);
    const acts = h("div", { class: "actions" },
      h("button", { type: "button", onclick: () => close(false), "data-action": "cancel" }, "Cancel"),
      (buttons || []).map((b) => h("button", { type: b.submit ? "submit" : "button", class: b.class || "", "data-action": b.action || "",
        onclick: b.submit ? undefined : () => close(b.value) }, b.label)));
    const form = h("form", { onsubmit: (e) => { e.preventDefault(); const sb = (buttons || []).find((b) => b.submit); if (sb) close(sb.value(form)); } },
      h("h2", {}, title), body, acts);
    box.replaceChildren(h("div", { class: "box" }, form));
    box.hidden = false;
    const first = form.querySelector("input, select, textarea, button.primary, button.danger");
    if (first) first.focus();
  });
};
// SG.confirm asks before a change; with typeToConfirm the user must type
// that word (a topic name before deleting it).
SG.confirm = function (title, message, action, typeToConfirm) {
  const input = typeToConfirm ? h("input", { id: "confirm-input", placeholder: typeToConfirm, autocomplete: "off" }) : null;
  const body = [h("p", {}, message), input ? h("label", {}, "Type " + typeToConfirm + " to confirm", input) : null];
  return SG.dialog(title, body, [{ label: action, class: "danger solid", action: "confirm", submit: true,
    value: () => !input || input.value === typeToConfirm }]);
};

// Table: columns [{key, label, num, fmt(row), sort(row), cls}], rows; a
// filter box matches any cell text; headers sort. opts: {name, key(row)
// for data-key, onclick(row), empty}. Returns {el, set(rows)} to refresh
// in place (sort and filter kept).
SG.table = function (columns, rows, opts) {
  opts = opts || {};
  let data = rows || [];
  let sortCol = opts.sort !== undefined ? opts.sort : null, asc = opts.asc !== undefined ? opts.asc : true;
  const filter = h("input", { type: "search", placeholder: "Filter", "data-filter": opts.name || "" });
  const count = h("span", { class: "count" });
  const thead = h("thead");
  const tbody = h("tbody");
  const table = h("table", { "data-table": opts.name || "" }, thead, tbody);
  const cell = (c, r) => (c.fmt ? c.fmt(r) : r[c.key]);
  const sortVal = (c, r) => (c.sort ? c.sort(r) : r[c.key]);
  const text = (v) => (v instanceof Node ? v.textContent : v === undefined || v === null ? "" : String(v));
  function render() {
    thead.replaceChildren(h("tr", {}, columns.map((c, i) => h("th", {
      class: (c.num ? "num " : "") + (sortCol === i ? "sorted " + (asc ? "asc" : "desc") : ""),
      onclick: () => { if (sortCol === i) asc = !asc; else { sortCol = i; asc = !c.num; } render(); },
    }, c.label))));
    const f = filter.value.trim().toLowerCase();
    let shown = data.filter((r) => !f || columns.some((c) => text(cell(c, r)).toLowerCase().includes(f)));
    if (sortCol !== null) {
      const c = columns[sortCol];
      shown = shown.slice().sort((a, b) => {
        const x = sortVal(c, a), y = sortVal(c, b);
        const d = typeof x === "number" && typeof y === "number" ? x - y : text(x).localeCompare(text(y), undefined, { numeric: true });
        return asc ? d : -d;
      });
    }
    tbody.replaceChildren(...(shown.length ? shown.map((r) => h("tr", {
      class: opts.onclick ? "click" : "", dataset: opts.key ? { key: opts.key(r) } : undefined,
      onclick: opts.onclick ? (e) => { if (!e.target.closest("button, a, input")) opts.onclick(r); } : undefined,
    }, columns.map((c) => h("td", { class: (c.num ? "num " : "") + (c.cls || "") }, cell(c, r)))))
      : [h("tr", {}, h("td", { colspan: columns.length, class: "empty" }, opts.empty || "Nothing to show."))]));
    count.textContent = shown.length === data.length ? data.length + " rows" : shown.length + " of " + data.length + " rows";
  }
  filter.addEventListener("input", render);
  render();
  const el = h("div", { class: "tablebox" }, h("div", { class: "tools" }, filter, count, opts.tools || null), h("div", { class: "scroll" }, table));
  return { el, set(rows) { data = rows || []; render(); } };
};

// Line chart on a canvas: series [{name, points: [{t, v}]}] over time.
// It redraws on resize and theme change; data-points and data-max record
// what it shows (for tests and for the curious).
SG.chart = function (name, unit) {
  const canvas = h("canvas", { "data-chart": name, role: "img", "aria-label": name + " chart" });
  const legend = h("div", { class: "legend" });
  const el = h("div", {}, h("div", { class: "chart" }, canvas), legend);
  let series = [];
  const css = (v) => getComputedStyle(document.documentElement).getPropertyValue(v).trim();
  function draw() {
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth, hgt = canvas.clientHeight;
    if (!w || !hgt) return;
    canvas.width = w * dpr; canvas.height = hgt * dpr;
    const g = canvas.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, hgt);
    const all = series.flatMap((s) => s.points);
    let t1 = Date.now(), t0 = t1 - 5 * 60 * 1000;
    if (all.length) t0 = Math.min(t0, Math.min(...all.map((p) => p.t)));
    let vmax = Math.max(1, ...all.map((p) => p.v));
    const mag = Math.pow(10, Math.floor(Math.log10(vmax)));
    vmax = Math.ceil(vmax / mag) * mag || 1;
    const L = 54, R = 10, T = 8, B = 22;
    const X = (t) => L + ((t - t0) / (t1 - t0 || 1)) * (w - L - R);
    const Y = (v) => T + (1 - v / vmax) * (hgt - T - B);
    g.font = "11px system-ui, sans-serif";
    g.fillStyle = css("--muted"); g.strokeStyle = css("--chart-grid"); g.lineWidth = 1;
    for (let i = 0; i <= 4; i++) {
      const v = (vmax * i) / 4, y = Math.round(Y(v)) + 0.5;
      g.beginPath(); g.moveTo(L, y); g.lineTo(w - R, y); g.stroke();
      g.textAlign = "right"; g.fillText(SG.rate(v), L - 6, y + 4);
    }
    g.textAlign = "center";
    for (let i = 0; i <= 4; i++) {
      const t = t0 + ((t1 - t0) * i) / 4;
      g.fillText(new Date(t).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }), X(t), hgt - 6);
    }
    series.forEach((s, i) => {
      if (!s.points.length) return;
      g.strokeStyle = css("--c" + (i % 8)); g.lineWidth = 1.8; g.beginPath();
      s.points.forEach((p, j) => (j ? g.lineTo(X(p.t), Y(p.v)) : g.moveTo(X(p.t), Y(p.v))));
      g.stroke();
      if (s.points.length < 3) {
        g.fillStyle = css("--c" + (i % 8));
        s.points.forEach((p) => { g.beginPath(); g.arc(X(p.t), Y(p.v), 2.5, 0, 2 * Math.PI); g.fill(); });
      }
    });
    canvas.dataset.points = String(all.length);
    canvas.dataset.max = String(all.length ? Math.max(...all.map((p) => p.v)) : 0);
    legend.replaceChildren(...series.map((s, i) => h("span", {}, h("i", { class: "sw" + (i % 8) }), s.name + " " +
      (s.points.length ? SG.rate(s.points[s.points.length - 1].v) : "-") + (unit || ""))));
  }
  new ResizeObserver(draw).observe(canvas);
  document.addEventListener("sg-theme", draw);
  return { el, set(s) { series = s; draw(); } };
};

// Live series: polls /api/series every interval while the page shows,
// keeping the last hour. spec: {names: [...], prefix, top, label(name)}.
SG.liveChart = function (name, spec, unit) {
  const chart = SG.chart(name, unit);
  const data = {};
  let since = 0;
  async function poll() {
    const q = SG.qs({ names: (spec.names || []).join(","), prefix: spec.prefix, top: spec.top, since });
    const r = await SG.get("/api/series?" + q);
    const cutoff = Date.now() - 3600 * 1000;
    for (const [n, pts] of Object.entries(r.series)) {
      const have = data[n] || [];
      data[n] = have.concat(pts).filter((p) => p.t >= cutoff);
    }
    const shown = Object.keys(r.series);
    for (const n of Object.keys(data)) if (!shown.includes(n)) delete data[n];
    for (const pts of Object.values(data)) for (const p of pts) since = Math.max(since, p.t);
    chart.set(shown.sort().map((n) => ({ name: spec.label ? spec.label(n) : n, points: data[n] })));
  }
  SG.every(5000, poll);
  return chart.el;
};

// Timers that belong to the page on screen: cleared when it changes. A
// refresh that fails says why in the page's #page-error (what the page
// shows is missing or stale) until the same refresh succeeds again.
SG.timers = [];
SG.pageErrors = new Map();
SG.showPageErrors = function () {
  const el = document.getElementById("page-error");
  if (el) el.textContent = [...new Set(SG.pageErrors.values())].join("; ");
};
SG.timerGen = 0;
SG.every = function (ms, fn) {
  const id = {}, gen = SG.timerGen;
  const run = () => Promise.resolve().then(fn).then(() => {
    if (SG.pageErrors.delete(id)) SG.showPageErrors();
  }, (e) => {
    if (e.status === 401) return;
    console.warn(e);
    if (gen !== SG.timerGen) return; // answered after its page was left
    SG.pageErrors.set(id, e.message || String(e));
    SG.showPageErrors();
  });
  run();
  SG.timers.push(setInterval(run, ms));
};
SG.clearTimers = () => { SG.timers.forEach(clearInterval); SG.timers = []; SG.pageErrors.clear(); SG.timerGen++; };

// Body views: text, hex, JSON.
SG.b64bytes = function (b64) {
  const s = atob(b64 || "");
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
};
SG.bodyView = function (b64, size) {
  const bytes = SG.b64bytes(b64);
  const text = new TextDecoder("utf-8", { fatal: false }).decode(bytes);
  const hex = () => {
    const lines = [];
    for (let i = 0; i < bytes.length; i += 16) {
      const row = Array.from(bytes.slice(i, i + 16));
      lines.push(i.toString(16).padStart(8, "0") + "  " + row.map((b) => b.toString(16).padStart(2, "0")).join(" ").padEnd(48) +
        "  " + row.map((b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join(""));
    }
    return lines.join("\n");
  };
  const json = () => { try { return JSON.stringify(JSON.parse(text), null, 2); } catch (e) { return "(not JSON: " + e.message + ")"; } };
  const pre = h("pre", { class: "body", "data-body": "" });
  const tabs = h("div", { class: "tabs" });
  const modes = { text: () => text, hex, json };
  const show = (m) => {
    pre.textContent = modes[m]();
    pre.dataset.mode = m;
    tabs.querySelectorAll("button").forEach((b) => b.classList.toggle("active", b.dataset.mode === m));
  };
  for (const m of Object.keys(modes)) tabs.append(h("button", { type: "button", dataset: { mode: m }, onclick: () => show(m) }, m.toUpperCase()));
  let first = "text";
  try { JSON.parse(text); first = "json"; } catch (e) { /* not JSON */ }
  show(first);
  return h("div", {}, tabs, size > bytes.length ? h("div", { class: "muted" }, "first " + SG.bytes(bytes.length) + " of " + SG.bytes(size)) : null, pre);
};

window.SG = SG;
})();
