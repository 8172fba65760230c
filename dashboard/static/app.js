// Caravanserai dashboard: plain JavaScript, no framework, no build step.
// Each page is rendered from the dashboard's JSON endpoints (docs/dashboard.md); the server-sent event stream
// /api/v1/stream says which resources changed, and the page showing them is fetched and drawn again.
"use strict";

const state = { readOnly: true, page: null, logs: null, pending: false, again: false, namespace: "" };
// The namespace picker: "" shows every namespace (the default), a name shows that namespace only. Kept per browser.
try { state.namespace = localStorage.getItem("caravanserai.namespace") || ""; } catch (err) { state.namespace = ""; }

// The first visit comes with ?token=… (the server has set its cookie by now): keep it out of the address bar.
if (new URLSearchParams(location.search).has("token")) history.replaceState(null, "", location.pathname + location.hash);

// ---- small helpers -------------------------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function age(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  const s = Math.max(0, Math.floor(seconds));
  if (s < 120) return s + "s";
  if (s < 7200) return Math.floor(s / 60) + "m";
  if (s < 172800) return Math.floor(s / 3600) + "h";
  return Math.floor(s / 86400) + "d";
}

function badge(text) {
  return el("span", { class: "badge " + text, text: text });
}

function quantity(name, value) {
  if (name === "cpu") return (Math.round(value * 1000) / 1000) + " cpu";
  if (name === "memory" || name === "disk" || name.endsWith("storage")) {
    const units = ["B", "Ki", "Mi", "Gi", "Ti"];
    let v = value, i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (Math.round(v * 10) / 10) + units[i];
  }
  return String(value);
}

async function api(path, options) {
  const response = await fetch(path, options);
  const body = await response.json().catch(() => ({ error: response.statusText }));
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

// Query string of a list endpoint: its filters and the picker's namespace ("" = every namespace).
function listQuery(filters) {
  return new URLSearchParams({ ...(filters || {}), namespace: state.namespace }).toString();
}

// Projects and ProjectSets are addressed by namespace and name.
function objectPath(plural, namespace, name) {
  return `/api/v1/namespaces/${encodeURIComponent(namespace || "default")}/${plural}/${encodeURIComponent(name)}`;
}

function objectHref(page, namespace, name) {
  return `#/${page}/${encodeURIComponent(namespace || "default")}/${encodeURIComponent(name)}`;
}

// A page's (namespace, name) from its route: `#/project/NS/NAME`, or `#/project/NAME` for a project of "default".
function namespaced(args) {
  return args.length > 1 ? [args[0], args[1]] : ["default", args[0]];
}

// Every namespace shown: the rows carry their namespace in a first column.
function allNamespaces() {
  return state.namespace === "";
}

async function fillNamespaces() {
  const picker = document.getElementById("namespace");
  let names = [];
  try { names = (await api("/api/v1/namespaces")).namespaces.map((n) => n.name); } catch (err) { names = []; }
  if (state.namespace && !names.includes(state.namespace)) names.push(state.namespace);
  picker.replaceChildren(el("option", { value: "", text: "all namespaces" }),
    names.map((n) => el("option", { value: n, text: n, selected: n === state.namespace })));
}

async function act(path, method, body) {
  return api(path, { method, headers: { "Content-Type": "application/json" }, body: JSON.stringify(body || {}) });
}

function toast(message, isError) {
  const box = document.getElementById("toast");
  box.textContent = message;
  box.className = isError ? "error" : "";
  box.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { box.hidden = true; }, isError ? 8000 : 3000);
}

// A drain's projects kept by disruption budgets (drain again once the moved replicas are available).
function drainHeld(answer) {
  const held = Object.entries((answer && answer.held) || {});
  return held.length ? `; kept by disruption budgets: ${held.map(([name, why]) => `${name} (${why})`).join(", ")}` : "";
}

async function action(description, run) {
  try {
    const more = await run();
    toast(description + (typeof more === "string" ? more : ""));
  } catch (err) {
    toast(err.message, true);
  }
}

function table(headers, rows, id) {
  return el("table", { id },
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { text: h })))),
    el("tbody", {}, rows));
}

// ---- pages ---------------------------------------------------------------------------------------------------

const pages = {
  cluster: { resources: ["nodes", "leases", "projects", "nodegroups"], render: renderCluster },
  projects: { resources: ["projects"], render: renderProjects },
  project: { resources: ["projects", "events", "nodes"], render: renderProject },
  projectsets: { resources: ["projectsets"], render: renderProjectSets },
  projectset: { resources: ["projectsets", "projects", "events"], render: renderProjectSet },
  events: { resources: ["events"], render: renderEvents },
  kinds: { resources: ["*"], render: renderKinds },
};

function route() {
  const path = location.hash.replace(/^#\/?/, "").split("?")[0];
  const parts = path.split("/").map(decodeURIComponent);
  const name = pages[parts[0]] ? parts[0] : "cluster";
  return { name, args: parts.slice(1) };
}

async function renderCluster() {
  const data = await api("/api/v1/cluster");
  const counts = Object.entries(data.phases).map(([phase, n]) => el("span", {}, badge(phase), " " + n));
  const nodes = data.nodes.map((node) => {
    const bars = node.resources.map((r) => {
      const share = r.allocatable > 0 ? Math.min(1, r.requested / r.allocatable) : 0;
      const fill = el("div", { class: "fill" + (share >= 1 ? " full" : "") });
      fill.style.width = (share * 100).toFixed(1) + "%";
      return el("div", { class: "bar", "data-resource": r.name },
        el("div", { class: "label" }, el("span", { text: r.name }),
          el("span", { text: quantity(r.name, r.requested) + " / " + quantity(r.name, r.allocatable) })),
        el("div", { class: "track" }, fill));
    });
    const buttons = el("div", { class: "actions write" },
      node.schedulable
        ? el("button", { onclick: () => action(`node/${node.name} cordoned`, () => act(`/api/v1/nodes/${encodeURIComponent(node.name)}/cordon`, "POST")) }, "Cordon")
        : el("button", { onclick: () => action(`node/${node.name} uncordoned`, () => act(`/api/v1/nodes/${encodeURIComponent(node.name)}/uncordon`, "POST")) }, "Uncordon"),
      el("button", { class: "danger", onclick: () => confirm(`Drain node ${node.name}? Its projects move to other nodes.`) &&
        action(`node/${node.name} drained`, () => act(`/api/v1/nodes/${encodeURIComponent(node.name)}/drain`, "POST").then(drainHeld)) }, "Drain"));
    return el("div", { class: "node", "data-name": node.name },
      el("h3", {}, node.name, badge(node.state), node.schedulable ? null : badge("cordoned")),
      el("div", { class: "facts" },
        `lease renewed ${age(node.leaseAge)} ago · ${node.address || "no address"} · ${node.schedulable ? "schedulable" : "unschedulable"}`),
      bars,
      el("div", { class: "projects" },
        el("span", { class: "muted", text: `${node.projects.length} project(s): ` }),
        node.projectRefs.map((p, i) => [i ? ", " : "", el("a", { href: objectHref("project", p.namespace, p.name),
          text: p.namespace === "default" || !p.namespace ? p.name : `${p.namespace}/${p.name}` })])),
      buttons);
  });
  const decision = (d) => d ? `${d.from} → ${d.to} (${age(d.age)} ago): ${d.reason}` : "—";
  const groups = data.groups.length ? [el("h2", { text: "Node groups" }), table(
    ["Group", "Min", "Max", "Desired", "Current", "Last scale-up", "Last scale-down"],
    data.groups.map((g) => el("tr", { "data-name": g.name },
      [g.name, g.min, g.max, g.desired, g.current, decision(g.lastScaleUp), decision(g.lastScaleDown)]
        .map((v) => el("td", { text: String(v) })))), "groups")] : [];
  return [el("h1", { text: "Cluster" }), el("div", { class: "summary" }, counts), groups,
    data.nodes.length ? el("div", { class: "nodes", id: "nodes" }, nodes) : el("p", { class: "muted", text: "No node has joined yet." })];
}

function projectFilters() {
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  return { label: params.get("label") || "", phase: params.get("phase") || "" };
}

async function renderProjects() {
  const filters = projectFilters();
  const data = await api("/api/v1/projects?" + listQuery(filters));
  const all = allNamespaces();
  const rows = data.projects.map((p) => el("tr", { "data-name": p.name, "data-namespace": p.namespace },
    all ? el("td", { class: "namespace", text: p.namespace }) : null,
    el("td", {}, el("a", { href: objectHref("project", p.namespace, p.name), text: p.name }),
      p.phase === "Pending" && p.reason ? el("div", { class: "reason", text: `${p.reason.reason}: ${p.reason.message}` }) : null),
    el("td", { class: "phase" }, badge(p.phase)),
    el("td", { text: p.node || "—" }),
    el("td", { text: p.ready }),
    el("td", { text: String(p.restarts) }),
    el("td", { text: age(p.age) }),
    el("td", { class: "write" }, el("button", { class: "danger delete", "data-name": p.name,
      onclick: () => confirm(`Delete project ${p.name} of namespace ${p.namespace}?`) && action(`project/${p.name} deleted`,
        () => api(objectPath("projects", p.namespace, p.name), { method: "DELETE", headers: { "Content-Type": "application/json" } })) }, "Delete"))));
  const label = el("input", { id: "filter-label", placeholder: "label selector, e.g. app=web", value: filters.label });
  const phase = el("select", { id: "filter-phase" },
    ["", "Pending", "Scheduled", "Running", "Failed", "Terminating", "Terminated"].map((ph) =>
      el("option", { value: ph, selected: ph === filters.phase, text: ph || "any phase" })));
  const apply = () => { location.hash = "#/projects?" + new URLSearchParams({ label: label.value, phase: phase.value }); };
  label.addEventListener("change", apply);
  phase.addEventListener("change", apply);
  return [el("h1", { text: "Projects" }),
    el("div", { class: "filters" }, label, phase),
    table([...(all ? ["Namespace"] : []), "Name", "Phase", "Node", "Ready", "Restarts", "Age", ""], rows, "projects-table"),
    applyPanel()];
}

function applyPanel() {
  // Made once and kept across redraws, so that live updates never wipe what is typed or the last result.
  if (!state.applyPanel) state.applyPanel = makeApplyPanel();
  return state.applyPanel;
}

function makeApplyPanel() {
  const text = el("textarea", { id: "apply-text", placeholder: "Paste a manifest (YAML or JSON) and press Apply", spellcheck: "false" });
  const result = el("div", { id: "apply-result", class: "result" });
  const button = el("button", { id: "apply-button", class: "primary", onclick: async () => {
    result.className = "result";
    result.textContent = "applying…";
    try {
      const body = await act("/api/v1/apply", "POST", { manifest: text.value, namespace: state.namespace });
      result.className = "result ok";
      result.textContent = body.applied.map((a) => `${a.object} ${a.action}`).join(", ");
    } catch (err) {
      result.className = "result error";
      result.textContent = err.message;
    }
  } }, "Apply");
  return el("div", { class: "panel write", id: "apply-panel" }, el("h2", { text: "Apply a manifest" }), text,
    el("div", { class: "actions" }, button), result);
}

async function renderProject(...args) {
  const [namespace, name] = namespaced(args);
  const p = await api(objectPath("projects", namespace, name));
  // For these condition types False is the healthy state: shown green, True shown red.
  const inverted = ["Degraded", "MemoryPressure", "DiskPressure", "NotReadyAt", "BackupOverdue", "RestoreFailed"];
  const shown = (c) => (inverted.includes(c.type) ? { True: "False", False: "True" }[c.status] || c.status : c.status);
  const conditions = p.conditions.map((c) => el("tr", {},
    el("td", { text: c.type }), el("td", {}, el("span", { class: "badge " + shown(c), text: c.status })), el("td", { text: c.reason }),
    el("td", { text: c.message }), el("td", { text: age(c.age) })));
  const services = p.services.map((s) => el("tr", { "data-name": s.name },
    el("td", { text: s.name }), el("td", {}, el("code", { text: s.image })), el("td", { text: s.state || "—" }),
    el("td", { text: s.ready ? "yes" : "no" }), el("td", { text: String(s.restarts) }), el("td", { text: s.message })));
  const events = p.events.map(eventRow);
  return [
    el("h1", {}, "Project ", name, " ", badge(p.phase)),
    el("p", { class: "muted" }, `namespace ${p.namespace} · node ${p.node || "—"} · ready ${p.ready} · restarts ${p.restarts} · age ${age(p.age)}`,
      p.projectset ? [" · replica of ", el("a", { href: objectHref("projectset", p.namespace, p.projectset), text: "projectset/" + p.projectset })] : null,
      p.reason ? el("div", { class: p.phase === "Pending" ? "reason" : "muted", id: "project-reason",
        text: `${p.reason.reason}: ${p.reason.message}` }) : null),
    p.urls.length ? el("p", {}, "Reach it at ", p.urls.map((u, i) => [i ? ", " : "", el("a", { href: u, text: u, target: "_blank", rel: "noopener" })])) : null,
    el("h2", { text: "Conditions" }), table(["Type", "Status", "Reason", "Message", "Age"], conditions),
    el("h2", { text: "Services" }), table(["Service", "Image", "State", "Ready", "Restarts", "Message"], services, "services-table"),
    ...(p.volumes.length ? [el("h2", { text: "Volumes" }),
      table(["Volume", "Type", "Repository", "Last backup", "Data"], volumeRows(p.volumes), "volumes-table")] : []),
    el("h2", { text: "Logs" }), logPanel(namespace, name, p),
    el("h2", { text: "Events" }), table(["Age", "Type", "Reason", "Object", "Message"], events),
  ];
}

// ---- ProjectSets: replicas, rollouts and their Progressing condition (docs/replicas.md) ---------------------------

function conditionCell(c) {
  if (!c) return el("td", { text: "—" });
  return el("td", { class: "condition", title: c.message }, el("span", { class: "badge " + c.status, text: c.status }), " " + c.reason,
    c.status === "False" ? el("div", { class: "reason", text: c.message }) : null);
}

async function renderProjectSets() {
  const data = await api("/api/v1/projectsets?" + listQuery());
  const all = allNamespaces();
  const rows = data.projectsets.map((s) => el("tr", { "data-name": s.name, "data-namespace": s.namespace },
    all ? el("td", { class: "namespace", text: s.namespace }) : null,
    el("td", {}, el("a", { href: objectHref("projectset", s.namespace, s.name), text: s.name }), s.paused ? [" ", badge("paused")] : null),
    el("td", { class: "desired", text: String(s.desired) }),
    el("td", { class: "ready", text: `${s.ready}/${s.desired}` }),
    el("td", { class: "updated", text: String(s.updated) }),
    el("td", { class: "available", text: String(s.available) }),
    el("td", { class: "revision" }, s.revision ? `${s.revision} ` : "—", s.updateRevision ? el("code", { text: s.updateRevision }) : null),
    conditionCell(s.condition),
    el("td", { text: age(s.age) })));
  return [el("h1", { text: "ProjectSets" }),
    data.projectsets.length ? table([...(all ? ["Namespace"] : []), "Name", "Desired", "Ready", "Up-to-date", "Available", "Revision", "Progressing", "Age"], rows, "projectsets-table")
      : el("p", { class: "muted", text: "No ProjectSet yet: apply one on the Projects page (docs/replicas.md)." })];
}

async function renderProjectSet(...args) {
  const [namespace, name] = namespaced(args);
  const s = await api(objectPath("projectsets", namespace, name));
  const st = s.strategy;
  const strategy = st.type === "Recreate" ? "Recreate"
    : `RollingUpdate (maxSurge ${st.maxSurge} = ${st.surge}, maxUnavailable ${st.maxUnavailable} = ${st.unavailable})`;
  const b = s.disruptionBudget;
  const budget = b ? `${b.minAvailable ? "minAvailable " + b.minAvailable : "maxUnavailable " + b.maxUnavailable} (${b.disruptionsAllowed} disruptions allowed)` : "none";
  const conditions = s.conditions.map((c) => el("tr", { "data-type": c.type },
    el("td", { text: c.type }), el("td", {}, badge(c.status)), el("td", { text: c.reason }), el("td", { text: c.message }), el("td", { text: age(c.age) })));
  const revisions = s.revisions.map((r) => el("tr", { "data-revision": String(r.revision) },
    el("td", { text: String(r.revision) }), el("td", {}, el("code", { text: r.hash })), el("td", { text: r.roles.join(", ") || "—" }), el("td", { text: age(r.age) })));
  const replicas = s.projects.map((p) => el("tr", { "data-name": p.name },
    el("td", {}, el("a", { href: objectHref("project", p.namespace, p.name), text: p.name })),
    el("td", {}, el("code", { text: p.revision || "—" })), el("td", { class: "phase" }, badge(p.phase)),
    el("td", { text: p.node || "—" }), el("td", { text: p.ready }), el("td", { text: age(p.age) })));
  return [
    el("h1", {}, "ProjectSet ", name, s.paused ? [" ", badge("paused")] : null),
    el("p", { class: "muted", id: "projectset-summary" },
      `${s.desired} desired · ${s.ready} ready · ${s.updated} up-to-date · ${s.available} available · revision ${s.revision || "—"}`),
    el("p", { class: "muted" }, `strategy ${strategy} · minReadySeconds ${s.minReadySeconds} · progress deadline ${s.progressDeadlineSeconds}s · disruption budget ${budget}`),
    el("h2", { text: "Conditions" }), table(["Type", "Status", "Reason", "Message", "Age"], conditions, "projectset-conditions"),
    el("h2", { text: "Replicas" }), table(["Project", "Revision", "Phase", "Node", "Ready", "Age"], replicas, "replicas-table"),
    el("h2", { text: "Revisions" }), table(["Revision", "Hash", "Role", "Age"], revisions, "revisions-table"),
    el("h2", { text: "Events" }), table(["Age", "Type", "Reason", "Object", "Message"], s.events.map(eventRow)),
  ];
}

// A volume's last backup against its `every` (overdue, restoring, last error), as `caractrl describe` says it.
function volumeRows(volumes) {
  return volumes.map((v) => {
    const last = !v.backedUp ? "no backup: the data stays on its node when the project moves"
      : (v.lastBackupAge === null ? "none yet" : `${age(v.lastBackupAge)} ago`) + ` (every ${v.every})`;
    return el("tr", { "data-name": v.name },
      el("td", { text: v.name }), el("td", { text: v.type || "—" }), el("td", { text: v.repository || "—" }),
      el("td", { class: "backup-age" }, last, v.overdue ? [" ", badge("Overdue")] : null),
      el("td", {},
        v.restoring ? el("div", { class: "restoring" }, badge("Restoring"), " " + v.restoring.text) : null,
        v.lastError ? el("div", { class: "error", text: v.lastError }) : null,
        v.message ? el("div", { class: "muted", text: v.message }) : null));
  });
}

function logPanel(namespace, name, project) {
  const key = `${namespace}/${name}`;
  const existing = state.logs && state.logs.project === key ? state.logs : null;
  const select = el("select", { id: "log-service" },
    el("option", { value: "", text: "every service" }),
    project.services.map((s) => el("option", { value: s.name, text: s.name, selected: existing && existing.service === s.name })));
  const pre = existing ? existing.pre : el("pre", { class: "logs", id: "logs" });
  if (!existing) openLogs(namespace, name, "", pre);
  select.addEventListener("change", () => openLogs(namespace, name, select.value, pre));
  return el("div", { class: "panel" }, el("div", { class: "filters" }, "Service ", select), pre);
}

function openLogs(namespace, name, service, pre) {
  closeLogs();
  pre.textContent = "";
  const source = new EventSource(`${objectPath("projects", namespace, name)}/logs?tail=100&service=${encodeURIComponent(service)}`);
  source.addEventListener("line", (e) => {
    const line = JSON.parse(e.data);
    const stick = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.append((service ? "" : `[${line.service}] `) + line.text.replace(/\n$/, "") + "\n");
    if (stick) pre.scrollTop = pre.scrollHeight;
  });
  source.addEventListener("failed", (e) => { pre.append(JSON.parse(e.data).error + "\n"); source.close(); });
  source.onerror = () => { if (source.readyState === EventSource.CLOSED) pre.append("(log stream ended)\n"); };
  state.logs = { project: `${namespace}/${name}`, service, pre, source };
}

function closeLogs() {
  if (state.logs) { state.logs.source.close(); state.logs = null; }
}

function eventRow(e) {
  return el("tr", { "data-namespace": e.namespace }, el("td", { text: age(e.age) }), el("td", {}, badge(e.type)), el("td", { text: e.reason }),
    el("td", { text: e.object }), el("td", { text: e.message }));
}

async function renderEvents() {
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  const filters = { type: params.get("type") || "", object: params.get("object") || "" };
  const data = await api("/api/v1/events?" + listQuery(filters));
  const type = el("select", { id: "filter-type" }, ["", "Normal", "Warning"].map((t) =>
    el("option", { value: t, selected: t === filters.type, text: t || "any type" })));
  const object = el("input", { id: "filter-object", placeholder: "object, e.g. project/web", value: filters.object });
  const apply = () => { location.hash = "#/events?" + new URLSearchParams({ type: type.value, object: object.value }); };
  type.addEventListener("change", apply);
  object.addEventListener("change", apply);
  return [el("h1", { text: "Events" }), el("div", { class: "filters" }, type, object),
    table(["Age", "Type", "Reason", "Object", "Message"], data.events.map(eventRow), "events-table")];
}

async function renderKinds(plural) {
  const known = await api("/api/v1/kinds");
  const links = el("div", { class: "summary" }, known.kinds.map((k) =>
    el("a", { href: "#/kinds/" + k.plural, class: k.plural === plural ? "badge Running" : "badge", text: k.kind })));
  if (!plural) return [el("h1", { text: "Kinds" }), el("p", { class: "muted", text: "Every kind the API serves, listed generically." }), links];
  const data = await api("/api/v1/kinds/" + encodeURIComponent(plural) + "?" + listQuery());
  const withNamespace = data.namespaced && allNamespaces();
  const rows = data.rows.map((r) => el("tr", { "data-name": r.name, "data-namespace": r.namespace },
    withNamespace ? el("td", { class: "namespace", text: r.namespace }) : null,
    el("td", { text: r.name }),
    r.cells.map((c) => el("td", { text: c === null || c === undefined ? "—" : typeof c === "object" ? JSON.stringify(c) : String(c) })),
    el("td", { text: age(r.age) })));
  return [el("h1", { text: data.kind }), links,
    table([...(withNamespace ? ["Namespace"] : []), "Name", ...data.columns, "Age"], rows, "kind-table")];
}

// ---- drawing and the change stream ---------------------------------------------------------------------------

async function draw() {
  if (state.pending) { state.again = true; return; }
  state.pending = true;
  const { name, args } = route();
  if (name !== "project") closeLogs();
  const section = { project: "projects", projectset: "projectsets" }[name] || name;
  document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.page === section));
  try {
    const content = await pages[name].render(...args);
    document.getElementById("main").replaceChildren(...[content].flat().filter(Boolean));
  } catch (err) {
    document.getElementById("main").replaceChildren(el("p", { class: "error", text: err.message }));
  } finally {
    state.pending = false;
    if (state.again) { state.again = false; draw(); }
  }
}

function listen() {
  const live = document.getElementById("live");
  const source = new EventSource("/api/v1/stream");
  source.addEventListener("hello", () => { live.textContent = "live"; live.className = "live on"; draw(); });
  source.addEventListener("change", (e) => {
    const change = JSON.parse(e.data);
    if (change.resources.includes("namespaces")) fillNamespaces();
    const wanted = pages[route().name].resources;
    if (wanted.includes("*") || change.resources.some((r) => wanted.includes(r))) draw();
  });
  source.onerror = () => { live.textContent = "reconnecting…"; live.className = "live off"; };
}

async function start() {
  try {
    const config = await api("/api/v1/config");
    state.readOnly = config.readOnly;
  } catch (err) {
    state.readOnly = true;
  }
  document.body.classList.toggle("read-only", state.readOnly);
  document.getElementById("read-only").hidden = !state.readOnly;
  const picker = document.getElementById("namespace");
  picker.addEventListener("change", () => {
    state.namespace = picker.value;
    try { localStorage.setItem("caravanserai.namespace", state.namespace); } catch (err) { /* private mode: not kept */ }
    draw();
  });
  fillNamespaces();
  window.addEventListener("hashchange", draw);
  listen();
  draw();
}

start();
