// SmartGo console pages: cluster, topics, consumer groups, messages,
// MQTT, state store. Each page renders into <main> from the JSON API
// (docs/console.md) and refreshes itself while shown.
(function () {
"use strict";

const { h } = SG;
const main = () => document.getElementById("main");

function page(title, ...children) {
  main().replaceChildren(h("h1", {}, title), h("div", { class: "bad", id: "page-error", role: "alert" }), ...children);
  SG.showPageErrors();
}
const panel = (title, ...children) => h("div", { class: "panel" }, title ? h("h2", {}, title) : null, ...children);
const adminOnly = (el) => (SG.isAdmin() ? el : null);

// ---- Cluster --------------------------------------------------------------

async function clusterPage() {
  const regs = SG.table([
    { key: "addr", label: "Registry" },
    { key: "ok", label: "State", fmt: (r) => h("span", { class: r.ok ? "ok" : "bad" }, r.ok ? "up" : "down") },
    { key: "brokers", label: "Broker groups", num: true },
    { key: "error", label: "Error", cls: "wrap" },
  ], [], { name: "registries", key: (r) => r.addr });
  const brokers = SG.table([
    { key: "cluster", label: "Cluster" }, { key: "name", label: "Broker" }, { key: "id", label: "Id", num: true },
    { key: "role", label: "Role", fmt: (r) => (r.error ? h("span", { class: "bad" }, "unreachable") : r.role) },
    { key: "addr", label: "Address" }, { key: "version", label: "Version" },
    { key: "bootTime", label: "Uptime", fmt: (r) => SG.ago(r.bootTime), sort: (r) => -r.bootTime },
    { key: "diskRatio", label: "Disk used", num: true, fmt: (r) => SG.pct(r.diskRatio) },
    { key: "minOffset", label: "Min offset", num: true, fmt: (r) => SG.num(r.minOffset) },
    { key: "maxOffset", label: "Max offset", num: true, fmt: (r) => SG.num(r.maxOffset) },
    { key: "lagBytes", label: "Repl. lag", num: true, fmt: (r) => (r.lagBytes < 0 ? "-" : SG.bytes(r.lagBytes)) },
    { key: "lagSeconds", label: "Lag (s)", num: true, fmt: (r) => (r.lagSeconds < 0 ? "-" : r.lagSeconds.toFixed(1)) },
    { key: "putTps", label: "Put/s", num: true, fmt: (r) => SG.rate(r.putTps) },
    { key: "getTps", label: "Get/s", num: true, fmt: (r) => SG.rate(r.getTps) },
  ], [], { name: "brokers", key: (r) => r.name + "/" + r.id });
  const bridges = SG.table([
    { key: "node", label: "Bridge node", cls: "mono" }, { key: "addrs", label: "MQTT addresses", fmt: (r) => (r.addrs || []).join(", ") },
    { key: "version", label: "Version" }, { key: "startedAt", label: "Uptime", fmt: (r) => SG.ago(r.startedAt), sort: (r) => -r.startedAt },
    { key: "connections", label: "Connections", num: true, fmt: (r) => SG.num(r.connections) },
    { key: "sessions", label: "Sessions", num: true, fmt: (r) => SG.num(r.sessions) },
    { key: "subscriptions", label: "Subscriptions", num: true, fmt: (r) => SG.num(r.subscriptions) },
    { key: "clusterSessions", label: "Cluster sessions", num: true, fmt: (r) => SG.num(r.clusterSessions) },
    { key: "retained", label: "Retained", num: true, fmt: (r) => SG.num(r.retained) },
  ], [], { name: "bridges", key: (r) => r.node, empty: "No bridge node is registered." });
  const errors = h("div", { class: "bad" });
  page("Cluster",
    h("div", { class: "grid" },
      panel("Messages per second", SG.liveChart("throughput", { names: ["total:put", "total:get"],
        label: (n) => (n === "total:put" ? "stored" : "pulled") })),
      panel("MQTT", SG.liveChart("mqtt", { names: ["mqtt:connections", "mqtt:in", "mqtt:out"],
        label: (n) => ({ "mqtt:connections": "connections", "mqtt:in": "in/s", "mqtt:out": "out/s" })[n] }))),
    h("p"), errors,
    panel("Registries", regs.el), panel("Brokers", brokers.el), panel("Bridge nodes", bridges.el));
  SG.every(10000, async () => {
    const c = await SG.get("/api/cluster");
    regs.set(c.registries); brokers.set(c.brokers); bridges.set(c.bridges);
    errors.textContent = (c.errors || []).join("; ");
  });
}

// ---- Topics ---------------------------------------------------------------

function topicForm(t) {
  const f = (name, label, value, attrs) => h("label", {}, label, h("input", Object.assign({ name, value: String(value), id: "topic-" + name }, attrs || {})));
  return [
    f("name", "Name", t ? t.name : "", t ? { readonly: true } : { required: true, pattern: "[%|a-zA-Z0-9_\\-]{1,127}" }),
    h("div", { class: "row" }, f("readQueues", "Read queues", t ? t.brokers[0].readQueues : 8, { type: "number", min: 1, max: 1024 }),
      f("writeQueues", "Write queues", t ? t.brokers[0].writeQueues : 8, { type: "number", min: 1, max: 1024 })),
    h("label", {}, "Permission", h("select", { name: "perm", id: "topic-perm" },
      [6, 4, 2].map((p) => h("option", { value: String(p), selected: t && t.brokers[0].perm === p }, SG.perm(p))))),
    h("label", { class: "check" }, h("input", { type: "checkbox", name: "order", checked: t && t.order }), "Ordered"),
  ];
}

async function editTopic(t) {
  const vals = await SG.dialog(t ? "Update topic " + t.name : "New topic", topicForm(t), [{
    label: t ? "Update" : "Create", class: "primary", action: "save", submit: true,
    value: (form) => Object.fromEntries(new FormData(form)),
  }]);
  if (!vals) return false;
  const body = { name: vals.name, readQueues: +vals.readQueues, writeQueues: +vals.writeQueues, perm: +vals.perm, order: vals.order === "on" };
  const what = t ? "Update" : "Create";
  if (!(await SG.confirm(what + " topic?", what + " topic " + body.name + " with " + body.readQueues + " read / " +
    body.writeQueues + " write queues, " + SG.perm(body.perm) + ", on every master?", what))) return false;
  try {
    const r = t ? await SG.api("PUT", "/api/topics/" + encodeURIComponent(t.name), body) : await SG.api("POST", "/api/topics", body);
    SG.toast("Topic " + body.name + ": " + (t ? "updated" : "created"));
    for (const w of r.warnings || []) SG.toast(w, true);
    return true;
  } catch (e) { SG.fail(e); return false; }
}

async function topicsPage() {
  const sys = h("input", { type: "checkbox", id: "show-system" });
  const table = SG.table([
    { key: "name", label: "Topic", fmt: (r) => h("a", { href: "#/topic/" + encodeURIComponent(r.name) }, r.name) , sort: (r) => r.name },
    { key: "brokers", label: "Brokers", fmt: (r) => r.brokers.map((b) => b.broker).join(", ") },
    { key: "read", label: "Read queues", num: true, fmt: (r) => r.brokers.reduce((s, b) => s + b.readQueues, 0), sort: (r) => r.brokers.reduce((s, b) => s + b.readQueues, 0) },
    { key: "write", label: "Write queues", num: true, fmt: (r) => r.brokers.reduce((s, b) => s + b.writeQueues, 0), sort: (r) => r.brokers.reduce((s, b) => s + b.writeQueues, 0) },
    { key: "perm", label: "Permission", fmt: (r) => SG.perm(r.brokers[0].perm) },
    { key: "order", label: "Ordered", fmt: (r) => (r.order ? "yes" : "") },
    { key: "tps", label: "Msgs/s", num: true, fmt: (r) => SG.rate(r.tps) },
  ], [], { name: "topics", key: (r) => r.name, onclick: (r) => { location.hash = "#/topic/" + encodeURIComponent(r.name); },
    tools: [h("label", { class: "check" }, sys, "system topics"),
      adminOnly(h("button", { class: "primary", id: "new-topic", onclick: async () => { if (await editTopic()) load(); } }, "New topic"))] });
  const errors = h("div", { class: "bad", id: "topics-partial" });
  const load = async () => {
    const rows = await SG.get("/api/topics?" + SG.qs({ system: sys.checked ? 1 : "" }));
    table.set(rows); errors.textContent = rows.partial || "";
  };
  sys.addEventListener("change", () => load().catch(SG.fail));
  page("Topics",
    panel("Messages stored per second, busiest topics", SG.liveChart("topics", { prefix: "topic:", top: 8, label: (n) => n.slice(6) })),
    errors, panel(null, table.el));
  SG.every(10000, load);
}

async function topicPage(name) {
  const [topics, route, stats] = await Promise.all([
    SG.get("/api/topics?system=1"),
    SG.get("/api/topics/" + encodeURIComponent(name) + "/route").catch((e) => ({ error: e.message })),
    SG.get("/api/topics/" + encodeURIComponent(name) + "/stats").catch(() => []),
  ]);
  const t = topics.find((x) => x.name === name);
  if (!t) {
    // Some brokers did not answer: the topic may be theirs.
    const why = topics.partial ? "Not found on the brokers that answered; " + topics.partial : "No such topic.";
    page("Topic " + name, panel(null, h("p", { class: "bad", id: "topic-missing" }, why))); return;
  }
  const addrs = {};
  for (const bd of route.brokerDatas || []) addrs[bd.brokerName] = Object.values(bd.brokerAddrs || {}).join(", ");
  const routeT = SG.table([
    { key: "brokerName", label: "Broker" }, { key: "addr", label: "Addresses", fmt: (r) => addrs[r.brokerName] || "-" },
    { key: "readQueueNums", label: "Read queues", num: true }, { key: "writeQueueNums", label: "Write queues", num: true },
    { key: "perm", label: "Permission", fmt: (r) => SG.perm(r.perm) },
  ], route.queueDatas || [], { name: "route", empty: route.error || "No route." });
  const statsT = SG.table([
    { key: "broker", label: "Broker", fmt: (r) => r.queue.brokerName }, { key: "q", label: "Queue", num: true, fmt: (r) => r.queue.queueId, sort: (r) => r.queue.queueId },
    { key: "minOffset", label: "Min offset", num: true }, { key: "maxOffset", label: "Max offset", num: true },
    { key: "lastUpdateTimestamp", label: "Last message", fmt: (r) => SG.time(r.lastUpdateTimestamp) },
    { key: "browse", label: "", fmt: (r) => h("a", { href: "#/messages/browse/" + [name, r.queue.brokerName, r.queue.queueId, Math.max(r.minOffset, r.maxOffset - 32)].map(encodeURIComponent).join("/") }, "browse") },
  ], stats, { name: "queues" });
  page("Topic " + name,
    h("div", { class: "row" }, h("a", { href: "#/topics" }, "\u2190 Topics"),
      adminOnly(h("button", { id: "edit-topic", onclick: async () => { if (await editTopic(t)) topicPage(name); } }, "Update")),
      adminOnly(h("button", { class: "danger", id: "delete-topic", onclick: async () => {
        if (!(await SG.confirm("Delete topic?", "Delete " + name + " and its queues from every master and registry? Its messages become unreachable.", "Delete", name))) return;
        try { await SG.api("DELETE", "/api/topics/" + encodeURIComponent(name)); SG.toast("Topic " + name + " deleted"); location.hash = "#/topics"; } catch (e) { SG.fail(e); }
      } }, "Delete"))),
    h("p"),
    panel("Messages stored per second", SG.liveChart("topic", { names: ["topic:" + name], label: () => name })),
    panel("Route", routeT.el), panel("Queues", statsT.el));
}

// ---- Consumer groups --------------------------------------------------------

async function groupsPage() {
  const sys = h("input", { type: "checkbox", id: "show-system-groups" });
  const table = SG.table([
    { key: "name", label: "Group", fmt: (r) => h("a", { href: "#/group/" + encodeURIComponent(r.name) }, r.name), sort: (r) => r.name },
    { key: "members", label: "Members", num: true },
    { key: "totalLag", label: "Lag", num: true, fmt: (r) => SG.num(r.totalLag) },
    { key: "tps", label: "Msgs/s", num: true, fmt: (r) => SG.rate(r.tps) },
    { key: "consumeEnable", label: "Consume", fmt: (r) => (r.consumeEnable ? "enabled" : "disabled") },
    { key: "brokers", label: "Brokers", fmt: (r) => r.brokers.join(", ") },
    { key: "error", label: "", cls: "bad" },
  ], [], { name: "groups", key: (r) => r.name, onclick: (r) => { location.hash = "#/group/" + encodeURIComponent(r.name); },
    tools: h("label", { class: "check" }, sys, "system groups") });
  const errors = h("div", { class: "bad", id: "groups-partial" });
  const load = async () => {
    const rows = await SG.get("/api/groups?" + SG.qs({ system: sys.checked ? 1 : "" }));
    table.set(rows); errors.textContent = rows.partial || "";
  };
  sys.addEventListener("change", () => load().catch(SG.fail));
  page("Consumer groups",
    panel("Messages pulled per second, busiest groups", SG.liveChart("groups", { prefix: "group:", top: 8, label: (n) => n.slice(6) })),
    errors, panel(null, table.el));
  SG.every(10000, load);
}

async function groupPage(name) {
  const members = SG.table([
    { key: "clientId", label: "Client id", cls: "mono" }, { key: "addr", label: "Address" }, { key: "language", label: "Language" },
    { key: "version", label: "Version", num: true }, { key: "broker", label: "Seen by" },
    { key: "subs", label: "Subscriptions", fmt: (r) => Object.entries(r.subscriptions || {}).map(([t, e]) => t + " (" + e + ")").join(", ") },
  ], [], { name: "members", empty: "No member is online." });
  const queues = SG.table([
    { key: "topic", label: "Topic", fmt: (r) => r.queue.topic }, { key: "broker", label: "Broker", fmt: (r) => r.queue.brokerName },
    { key: "q", label: "Queue", num: true, fmt: (r) => r.queue.queueId, sort: (r) => r.queue.queueId },
    { key: "brokerOffset", label: "Broker offset", num: true }, { key: "consumerOffset", label: "Consumer offset", num: true },
    { key: "lag", label: "Lag", num: true }, { key: "lastTimestamp", label: "Last consumed", fmt: (r) => SG.time(r.lastTimestamp) },
  ], [], { name: "progress" });
  const total = h("span", { id: "total-lag" });
  const topicSel = h("select", { name: "topic", id: "reset-topic" });
  const when = h("input", { type: "datetime-local", name: "when", id: "reset-time", step: 1 });
  const reset = adminOnly(panel("Reset offsets by time",
    h("form", { class: "inline", onsubmit: async (e) => {
      e.preventDefault();
      const ts = new Date(when.value).getTime();
      if (!topicSel.value || !(ts > 0)) { SG.toast("Pick a topic and a time", true); return; }
      if (!(await SG.confirm("Reset offsets?", "Move group " + name + " on topic " + topicSel.value + " to the first message stored at or after " +
        new Date(ts).toLocaleString() + "? Stop the group's consumers first, or they may commit over the reset.", "Reset"))) return;
      try {
        const r = await SG.api("POST", "/api/groups/" + encodeURIComponent(name) + "/reset", { topic: topicSel.value, timestamp: ts });
        SG.toast("Reset " + r.resets.length + " queues"); load();
      } catch (err) { SG.fail(err); }
    } }, h("label", {}, "Topic", topicSel), h("label", {}, "Time", when), h("button", { class: "danger", type: "submit", id: "reset-submit" }, "Reset"))));
  const load = async () => {
    const g = await SG.get("/api/groups/" + encodeURIComponent(name));
    members.set(g.members); queues.set(g.queues); errors.textContent = g.partial || "";
    total.textContent = "Total lag " + SG.num(g.totalLag) + " \u00b7 " + SG.rate(g.tps) + " msgs/s";
    const topics = [...new Set(g.queues.map((q) => q.queue.topic))].sort();
    if (topicSel.options.length !== topics.length) topicSel.replaceChildren(...topics.map((t) => h("option", { value: t }, t)));
  };
  const errors = h("div", { class: "bad", id: "group-partial" });
  page("Group " + name, h("div", { class: "row space" }, h("a", { href: "#/groups" }, "\u2190 Consumer groups"), total), h("p"), errors,
    panel("Messages pulled per second", SG.liveChart("group", { names: ["group:" + name], label: () => name })),
    panel("Members", members.el), panel("Progress per queue", queues.el), reset);
  SG.every(10000, load);
}

// ---- Messages ---------------------------------------------------------------

function messageDetail(m) {
  const props = Object.entries(m.properties || {}).sort();
  const group = h("input", { name: "group", id: "resend-group", placeholder: "consumer group", required: true });
  const resend = adminOnly(h("form", { class: "inline", onsubmit: async (e) => {
    e.preventDefault();
    if (!(await SG.confirm("Resend message?", "Deliver message " + m.offsetMsgId + " again to the consumers of group " + group.value + " (through its retry topic, in about a second)?", "Resend"))) return;
    try { await SG.api("POST", "/api/messages/resend", { msgId: m.offsetMsgId, group: group.value }); SG.toast("Resent to " + group.value); } catch (err) { SG.fail(err); }
  } }, h("label", {}, "Resend to group", group), h("button", { type: "submit", id: "resend-submit" }, "Resend")));
  return panel("Message " + m.msgId,
    h("dl", { class: "kv" },
      [["Offset id", m.offsetMsgId], ["Topic", m.topic], ["Queue", m.broker + " / " + m.queueId + " @ " + m.queueOffset],
        ["Tags", m.tags || "-"], ["Keys", (m.keys || []).join(" ") || "-"], ["Born", SG.time(m.bornTimestamp) + " from " + m.bornHost],
        ["Stored", SG.time(m.storeTimestamp) + " on " + m.storeHost], ["Reconsumed", m.reconsumeTimes], ["Body size", SG.bytes(m.bodySize)]]
        .map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    h("h2", {}, "Properties"),
    props.length ? h("dl", { class: "kv mono", id: "props" }, props.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])) : h("p", { class: "muted" }, "none"),
    h("h2", {}, "Body"), SG.bodyView(m.body, m.bodySize), h("p"), resend);
}

async function messagesPage(args) {
  const detail = h("div", { id: "message-detail" });
  const results = SG.table([
    { key: "msgId", label: "Message id", cls: "mono" }, { key: "topic", label: "Topic" },
    { key: "queue", label: "Queue", fmt: (r) => r.broker + "/" + r.queueId + "@" + r.queueOffset },
    { key: "tags", label: "Tags" }, { key: "keys", label: "Keys", fmt: (r) => (r.keys || []).join(" ") },
    { key: "storeTimestamp", label: "Stored", fmt: (r) => SG.time(r.storeTimestamp) },
    { key: "bodySize", label: "Size", num: true, fmt: (r) => SG.bytes(r.bodySize) },
  ], [], { name: "messages", key: (r) => r.offsetMsgId, onclick: (r) => detail.replaceChildren(messageDetail(r)), empty: "Search for messages above." });
  const show = (list) => {
    results.set(list);
    detail.replaceChildren(list.length === 1 ? messageDetail(list[0]) : "");
    if (!list.length) SG.toast("No message found", true);
  };
  const run = (fn) => async (e) => { e.preventDefault(); try { show(await fn(new FormData(e.target))); } catch (err) { SG.fail(err); } };
  const input = (name, label, attrs) => h("label", {}, label, h("input", Object.assign({ name, id: "msg-" + name }, attrs || {})));
  const forms = {
    key: h("form", { class: "inline", onsubmit: run((f) => SG.get("/api/messages/by-key?" + SG.qs({ topic: f.get("topic"), key: f.get("key") }))) },
      input("topic", "Topic", { required: true }), input("key", "Key", { required: true }), h("button", { class: "primary", id: "by-key" }, "Find")),
    id: h("form", { class: "inline", onsubmit: run((f) => SG.get("/api/messages/by-id?" + SG.qs({ id: f.get("id"), topic: f.get("idtopic") }))) },
      input("id", "Offset id, or Message id", { required: true, size: 36 }), input("idtopic", "Topic (for a Message id)"),
      h("button", { class: "primary", id: "by-id" }, "Find")),
    browse: h("form", { class: "inline", onsubmit: run(async (f) => (await SG.get("/api/messages/browse?" +
      SG.qs({ topic: f.get("btopic"), broker: f.get("broker"), queue: f.get("queue"), offset: f.get("offset"), count: f.get("count") }))).messages) },
      input("btopic", "Topic", { required: true, value: args[1] }), input("broker", "Broker", { required: true, value: args[2] }),
      input("queue", "Queue", { type: "number", min: 0, value: args[3] || 0 }), input("offset", "From offset", { type: "number", min: 0, value: args[4] || 0 }),
      input("count", "Count", { type: "number", min: 1, max: 256, value: 32 }), h("button", { class: "primary", id: "browse" }, "Browse")),
  };
  const tabs = h("div", { class: "tabs" });
  const holder = h("div");
  const select = (k) => {
    holder.replaceChildren(forms[k]);
    tabs.querySelectorAll("button").forEach((b) => b.classList.toggle("active", b.dataset.tab === k));
  };
  for (const [k, label] of [["key", "By key"], ["id", "By id"], ["browse", "By offset"]]) {
    tabs.append(h("button", { type: "button", dataset: { tab: k }, onclick: () => select(k) }, label));
  }
  select(args[0] === "browse" ? "browse" : "key");
  page("Messages", panel(null, tabs, holder), panel("Results", results.el), detail);
  if (args[0] === "browse" && args[1]) forms.browse.requestSubmit();
}

// ---- MQTT ---------------------------------------------------------------------

async function mqttPage(args) {
  const tab = args[0] || "clients";
  const subs = (r) => (r.subscriptions || []).map((s) => s.filter + " (QoS " + s.qos + ")").join(", ");
  const prefix = h("input", { type: "search", id: "mqtt-prefix", placeholder: "client id or topic prefix" });
  let table, url;
  if (tab === "clients") {
    url = "/api/mqtt/clients";
    table = SG.table([
      { key: "clientId", label: "Client id", cls: "mono" }, { key: "node", label: "Node", cls: "mono" }, { key: "remoteAddr", label: "Address" },
      { key: "protocolVersion", label: "Version", fmt: (r) => ({ 3: "3.1", 4: "3.1.1", 5: "5" })[r.protocolVersion] || r.protocolVersion },
      { key: "keepAlive", label: "Keep alive", num: true, fmt: (r) => r.keepAlive + " s" },
      { key: "subs", label: "Subscriptions", cls: "wrap", fmt: subs }, { key: "inflight", label: "In flight", num: true }, { key: "queued", label: "Queued", num: true },
      { key: "act", label: "", fmt: (r) => adminOnly(h("button", { class: "danger", dataset: { disconnect: r.clientId }, onclick: async () => {
        if (!(await SG.confirm("Disconnect client?", "Disconnect " + r.clientId + " from node " + r.node + "? Its session stays as it asked.", "Disconnect"))) return;
        try { await SG.api("POST", "/api/mqtt/clients/" + encodeURIComponent(r.clientId) + "/disconnect", { node: r.node }); SG.toast(r.clientId + " disconnected"); load(); } catch (e) { SG.fail(e); }
      } }, "Disconnect")) },
    ], [], { name: "mqtt-clients", key: (r) => r.clientId, empty: "No client is connected." });
  } else if (tab === "sessions") {
    url = "/api/mqtt/sessions";
    table = SG.table([
      { key: "clientId", label: "Client id", cls: "mono" }, { key: "online", label: "State", fmt: (r) => h("span", { class: "pill " + (r.online ? "on" : "off") }, r.online ? "online" : "offline") },
      { key: "node", label: "Node", cls: "mono" }, { key: "expiry", label: "Expiry", num: true, fmt: (r) => r.expiry + " s" },
      { key: "disconnectedAt", label: "Disconnected", fmt: (r) => SG.time(r.disconnectedAt) }, { key: "pending", label: "Pending", num: true },
      { key: "subs", label: "Subscriptions", cls: "wrap", fmt: subs },
    ], [], { name: "mqtt-sessions", key: (r) => r.clientId, empty: "No persistent session." });
  } else {
    url = "/api/mqtt/retained";
    table = SG.table([
      { key: "topic", label: "Topic" }, { key: "qos", label: "QoS", num: true }, { key: "size", label: "Size", num: true, fmt: (r) => SG.bytes(r.size) },
      { key: "payload", label: "Payload", cls: "wrap mono", fmt: (r) => { const t = new TextDecoder().decode(SG.b64bytes(r.payload)); return t.length > 120 ? t.slice(0, 117) + "..." : t; } },
    ], [], { name: "mqtt-retained", key: (r) => r.topic, empty: "No retained message." });
  }
  const total = h("span", { class: "muted" });
  const errors = h("div", { class: "bad", id: "mqtt-partial" });
  const load = async () => {
    const p = await SG.get(url + "?" + SG.qs({ prefix: prefix.value, limit: 1000 }));
    table.set(p.items); total.textContent = SG.num(p.total) + " in all" + (p.next ? " (first 1,000 shown; narrow with a prefix)" : "");
    errors.textContent = p.partial || "";
  };
  prefix.addEventListener("change", () => load().catch(SG.fail));
  const tabs = h("div", { class: "tabs" }, [["clients", "Connected clients"], ["sessions", "Sessions"], ["retained", "Retained messages"]]
    .map(([k, l]) => h("button", { class: k === tab ? "active" : "", dataset: { tab: k }, onclick: () => { location.hash = "#/mqtt/" + k; } }, l)));
  page("MQTT",
    panel("Connections and messages per second", SG.liveChart("mqtt", { names: ["mqtt:connections", "mqtt:in", "mqtt:out"],
      label: (n) => ({ "mqtt:connections": "connections", "mqtt:in": "in/s", "mqtt:out": "out/s" })[n] })),
    panel(null, tabs, h("div", { class: "row" }, prefix, total), errors, h("p"), table.el));
  SG.every(5000, load);
}

// ---- AMQP ---------------------------------------------------------------------

async function amqpPage(args) {
  const tab = args[0] === "connections" ? "connections" : "queues";
  const prefix = h("input", { type: "search", id: "amqp-prefix", placeholder: tab === "queues" ? "queue name prefix" : "client address prefix" });
  const flags = (r) => ["durable", "autoDelete", "exclusive"].filter((k) => r[k]).map((k) => k === "autoDelete" ? "auto-delete" : k).join(", ") || "-";
  let table, url;
  if (tab === "queues") {
    url = "/api/amqp/queues";
    table = SG.table([
      { key: "name", label: "Queue", cls: "mono" }, { key: "vhost", label: "Vhost", cls: "mono" }, { key: "node", label: "Node", cls: "mono" },
      { key: "flags", label: "Flags", fmt: flags },
      { key: "ready", label: "Ready", num: true }, { key: "unacked", label: "Unacked", num: true },
      { key: "readyBytes", label: "Bytes", num: true, fmt: (r) => SG.bytes(r.readyBytes) }, { key: "consumers", label: "Consumers", num: true },
      { key: "published", label: "Published", num: true }, { key: "delivered", label: "Delivered", num: true }, { key: "acked", label: "Acked", num: true },
      { key: "act", label: "", fmt: (r) => adminOnly(h("button", { class: "danger", dataset: { purge: r.name }, onclick: async () => {
        if (!(await SG.confirm("Purge queue?", "Drop the " + r.ready + " ready messages of " + r.name + " (vhost " + r.vhost + ") on node " + r.node + "? Unacknowledged ones stay.", "Purge"))) return;
        try { await SG.api("POST", "/api/amqp/queues/purge", { node: r.node, vhost: r.vhost, queue: r.name }); SG.toast(r.name + " purged"); load(); } catch (e) { SG.fail(e); }
      } }, "Purge")) },
    ], [], { name: "amqp-queues", key: (r) => r.node + "/" + r.vhost + "/" + r.name, empty: "No AMQP queue." });
  } else {
    url = "/api/amqp/connections";
    table = SG.table([
      { key: "name", label: "Connection", cls: "mono" }, { key: "node", label: "Node", cls: "mono" }, { key: "user", label: "User" },
      { key: "vhost", label: "Vhost", cls: "mono" }, { key: "client", label: "Client" }, { key: "channels", label: "Channels", num: true },
      { key: "state", label: "State", fmt: (r) => (r.state ? h("span", { class: r.state === "running" ? "ok" : r.state === "blocked" ? "bad" : "warn" }, r.state) : "-") },
      { key: "connectedAt", label: "Connected", fmt: (r) => SG.time(r.connectedAt) },
      { key: "act", label: "", fmt: (r) => adminOnly(h("button", { class: "danger", dataset: { close: r.name }, onclick: async () => {
        if (!(await SG.confirm("Close connection?", "Close " + r.name + " on node " + r.node + "? Its unacknowledged messages go back to their queues.", "Close"))) return;
        try { await SG.api("POST", "/api/amqp/connections/close", { node: r.node, name: r.name }); SG.toast(r.name + " closed"); load(); } catch (e) { SG.fail(e); }
      } }, "Close")) },
    ], [], { name: "amqp-connections", key: (r) => r.node + "/" + r.name, empty: "No AMQP connection." });
  }
  const total = h("span", { class: "muted" });
  const errors = h("div", { class: "bad", id: "amqp-partial" });
  const load = async () => {
    const p = await SG.get(url + "?" + SG.qs({ prefix: prefix.value, limit: 1000 }));
    table.set(p.items); total.textContent = SG.num(p.total) + " in all" + (p.next ? " (first 1,000 per node shown; narrow with a prefix)" : "");
    errors.textContent = p.partial || "";
  };
  prefix.addEventListener("change", () => load().catch(SG.fail));
  const tabs = h("div", { class: "tabs" }, [["queues", "Queues"], ["connections", "Connections"]]
    .map(([k, l]) => h("button", { class: k === tab ? "active" : "", dataset: { tab: k }, onclick: () => { location.hash = "#/amqp/" + k; } }, l)));
  page("AMQP", panel(null, tabs, h("div", { class: "row" }, prefix, total), errors, h("p"), table.el));
  SG.every(5000, load);
}

// ---- State store ----------------------------------------------------------------

async function stateStorePage() {
  const prefix = h("input", { name: "prefix", id: "ss-prefix", placeholder: "key prefix" });
  let after = "";
  const more = h("button", { type: "button", id: "ss-more", hidden: true, onclick: () => load(true) }, "Next page");
  const table = SG.table([
    { key: "key", label: "Key", cls: "mono", fmt: (r) => new TextDecoder().decode(SG.b64bytes(r.key)) },
    { key: "shard", label: "Shard", num: true }, { key: "version", label: "Version", cls: "mono" },
    { key: "size", label: "Size", num: true, fmt: (r) => SG.bytes(r.size) },
    { key: "value", label: "Value", cls: "wrap mono", fmt: (r) => { const t = new TextDecoder().decode(SG.b64bytes(r.value)); return t.length > 160 ? t.slice(0, 157) + "..." : t; } },
    { key: "expiresAt", label: "Expires", fmt: (r) => SG.time(r.expiresAt) },
  ], [], { name: "statestore", key: (r) => new TextDecoder().decode(SG.b64bytes(r.key)), empty: "No key with this prefix." });
  const errors = h("div", { class: "bad", id: "ss-partial" });
  async function load(next) {
    if (!next) after = "";
    try {
      const p = await SG.get("/api/statestore/keys?" + SG.qs({ prefix: prefix.value, after, limit: 100 }));
      table.set(p.keys); errors.textContent = p.partial || "";
      more.hidden = !p.more;
      if (p.keys.length) after = new TextDecoder().decode(SG.b64bytes(p.keys[p.keys.length - 1].key));
    } catch (e) { SG.fail(e); }
  }
  const twins = twinPanel();
  page("State store",
    panel(null, h("form", { class: "inline", onsubmit: (e) => { e.preventDefault(); load(false); } },
      h("label", {}, "Key prefix", prefix), h("button", { class: "primary", id: "ss-search" }, "Browse"), more)),
    errors, panel("Keys", table.el), twins.el);
  load(false);
  twins.load();
}

// twinPanel lists device identities (a page at a time) and shows a
// device's twin document.
function twinPanel() {
  let next = "";
  const doc = h("div", { id: "twin-doc" });
  const more = h("button", { type: "button", id: "twin-more", hidden: true, onclick: () => load(true) }, "Next page");
  const table = SG.table([
    { key: "deviceId", label: "Device", cls: "mono" }, { key: "status", label: "Status" },
    { key: "connectionState", label: "Connection" }, { key: "lastActivityTime", label: "Last activity", fmt: (r) => SG.isoTime(r.lastActivityTime), sort: (r) => Date.parse(r.lastActivityTime || "") || 0 },
    { key: "cloudToDeviceMessageCount", label: "C2D messages", num: true },
  ], [], { name: "devices", key: (r) => r.deviceId, empty: "No device identity.", onclick: async (r) => {
    try {
      const t = await SG.get("/api/twins/" + encodeURIComponent(r.deviceId));
      doc.replaceChildren(h("h2", {}, "Twin of " + r.deviceId + " (version " + t.version + ")"),
        h("pre", { class: "body", "data-twin": r.deviceId }, JSON.stringify(t.twin, null, 2)));
    } catch (e) { SG.fail(e); }
  } });
  async function load(page) {
    try {
      const p = await SG.get("/api/twins?" + SG.qs({ pageSize: 100, continuation: page ? next : "" }));
      table.set(p.devices);
      next = p.continuation || "";
      more.hidden = !next;
    } catch (e) { table.set([]); doc.replaceChildren(h("p", { class: "muted" }, "Twins: " + e.message)); }
  }
  return { el: panel("Device twins", h("div", { class: "row" }, more), table.el, doc), load: () => load(false) };
}

// ---- Router, login, theme ------------------------------------------------------------

const routes = {
  cluster: clusterPage, topics: topicsPage, topic: (a) => topicPage(a[0]), groups: groupsPage, group: (a) => groupPage(a[0]),
  messages: messagesPage, mqtt: mqttPage, amqp: amqpPage, statestore: stateStorePage,
};

async function route() {
  SG.clearTimers();
  // A hand-typed hash may hold a malformed escape: keep that part as typed.
  const decode = (p) => { try { return decodeURIComponent(p); } catch (e) { return p; } };
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decode);
  const name = routes[parts[0]] ? parts[0] : "cluster";
  const navName = { topic: "topics", group: "groups" }[name] || name;
  document.querySelectorAll("#nav a.item").forEach((a) => a.classList.toggle("active", a.dataset.page === navName));
  main().dataset.page = name;
  try { await routes[name](parts.slice(1)); } catch (e) { if (e.status !== 401) SG.fail(e); }
}

function showLogin(msg) {
  SG.clearTimers();
  document.getElementById("app").hidden = true;
  document.getElementById("login").hidden = false;
  document.getElementById("login-error").textContent = msg || "";
  document.getElementById("login-user").focus();
}

function showApp(s) {
  SG.session = s;
  document.getElementById("login").hidden = true;
  document.getElementById("app").hidden = false;
  document.getElementById("whoami").textContent = s.user + " \u00b7 " + s.role;
  document.getElementById("logout").hidden = !s.login;
  route();
}

async function start() {
  SG.onUnauthorized = () => showLogin("Your session ended; log in again.");
  document.getElementById("login-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      showApp(await SG.api("POST", "/api/login", { user: document.getElementById("login-user").value, password: document.getElementById("login-pass").value }));
      document.getElementById("login-pass").value = "";
    } catch (err) { document.getElementById("login-error").textContent = err.message; }
  });
  document.getElementById("logout").addEventListener("click", async () => {
    try { await SG.api("POST", "/api/logout"); } catch (e) { /* gone anyway */ }
    SG.session = null; showLogin();
  });
  document.getElementById("theme-toggle").addEventListener("click", () => {
    const t = document.documentElement.getAttribute("data-theme") === "dark" ? "light" : "dark";
    document.documentElement.setAttribute("data-theme", t);
    localStorage.setItem("smartgo-theme", t);
    document.dispatchEvent(new Event("sg-theme"));
  });
  window.addEventListener("hashchange", () => { if (SG.session) route(); });
  try { showApp(await SG.get("/api/session")); } catch (e) { showLogin(e.status === 401 ? "" : e.message); }
}

start();
})();
