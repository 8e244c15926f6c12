// Muster's console: one page, no dependencies. Every piece of HTML is built with
// document.createElement and textContent, never from strings, so text from players (names,
// metadata, messages) can never become markup.
"use strict";

const state = { me: null, timer: null };

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (key === "on") for (const [event, fn] of Object.entries(value)) node.addEventListener(event, fn);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key in node && typeof value !== "string") node[key] = value;
    else node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
    this.code = body && body.error;
  }
}

async function api(method, path, body) {
  const headers = {};
  if (body !== undefined) headers["content-type"] = "application/json";
  if (method !== "GET" && state.me) headers["x-csrf-token"] = state.me.csrf;
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
  });
  const text = await response.text();
  const parsed = text ? JSON.parse(text) : {};
  if (!response.ok) {
    if (response.status === 401 && path !== "/api/login") showLogin();
    throw new ApiError(response.status, parsed);
  }
  return parsed;
}

// Each page renders into a root of its own, taken when it starts: a page still loading when the
// operator moves on renders into its detached root, never over the next page.
function view() {
  return state.root || document.getElementById("view");
}

function showError(error) {
  view().prepend(el("p", { class: "error", role: "alert" }, error.message));
}

// --- logging in --------------------------------------------------------------------------

function showLogin() {
  state.me = null;
  stopPolling();
  document.getElementById("nav").hidden = true;
  document.getElementById("logout").hidden = true;
  document.getElementById("who").textContent = "";
  state.root = null;
  document.getElementById("view").replaceChildren();
  document.getElementById("login").hidden = false;
}

function loggedIn(me) {
  state.me = me;
  document.getElementById("login").hidden = true;
  document.getElementById("nav").hidden = false;
  document.getElementById("logout").hidden = false;
  document.getElementById("who").textContent = `${me.username} (${me.role})`;
  for (const link of document.querySelectorAll("#nav [data-role=admin]")) link.hidden = me.role !== "admin";
  route();
}

async function login(event) {
  event.preventDefault();
  const form = event.target;
  const error = document.getElementById("login-error");
  error.hidden = true;
  try {
    loggedIn(await api("POST", "/api/login", {
      username: form.username.value,
      password: form.password.value,
    }));
    form.password.value = "";
  } catch (e) {
    error.textContent = e.message;
    error.hidden = false;
  }
}

async function logout() {
  try {
    await api("POST", "/api/logout", {});
  } finally {
    showLogin();
  }
}

// --- pages -------------------------------------------------------------------------------

const pages = {
  status: statusPage,
  links: linksPage,
  chat: chatPage,
  groups: groupsPage,
  cluster: clusterPage,
  leaderboards: leaderboardsPage,
  matches: matchesPage,
  config: configPage,
  players: playersPage,
  storage: storagePage,
  runtime: runtimePage,
  audit: auditPage,
  users: usersPage,
  parties: partiesPage,
  world: worldPage,
  autoscaler: autoscalerPage,
};

function canChange() {
  return state.me && state.me.role !== "readonly";
}

function table(id, headings, rows) {
  return el("table", { id }, el("thead", {}, el("tr", {}, headings.map((h) => el("th", {}, h)))), el("tbody", {}, rows));
}

function formJson(text, what) {
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`${what} is not valid JSON.`);
  }
}

function route() {
  if (!state.me) return;
  stopPolling();
  const name = location.hash.replace(/^#/, "").split("/")[0] || "status";
  for (const link of document.querySelectorAll("#nav a")) {
    link.classList.toggle("active", link.getAttribute("href") === `#${name}`);
  }
  state.root = el("section");
  document.getElementById("view").replaceChildren(state.root);
  const arg = decodeURIComponent(location.hash.replace(/^#[^/]*\/?/, ""));
  (pages[name] || statusPage)(arg).catch(showError);
}

function stopPolling() {
  if (state.timer) clearInterval(state.timer);
  state.timer = null;
}

// --- status: charts of the history kept on the server -------------------------------------

// Which series each chart draws: [metric, stat, scale], one line per label set.
const CHARTS = [
  { id: "ccu", title: "Players online and sockets", lines: [["users_online", "value"], ["sockets_open", "value"]] },
  { id: "messages", title: "Realtime messages/s by kind", lines: [["realtime_messages_total", "rate"]] },
  { id: "rpc_rate", title: "RPC calls/s by function", lines: [["rpc_duration_seconds", "rate"]] },
  { id: "rpc_latency", title: "RPC latency p50 / p99 (ms)", lines: [["rpc_duration_seconds", "p50", 1000], ["rpc_duration_seconds", "p99", 1000]] },
  { id: "matches", title: "Matches and their players", lines: [["matches", "value"], ["match_players", "value"]] },
  { id: "ticks", title: "Match ticks/s and late ticks/s", lines: [["match_ticks_total", "rate"], ["match_late_ticks_total", "rate"]] },
  { id: "matchmaker", title: "Matchmaker: tickets waiting, matched/s", lines: [["matchmaker_tickets", "value"], ["matchmaker_matched_total", "rate"]] },
  { id: "matchmaker_wait", title: "Matchmaker wait p50 / p99 (s)", lines: [["matchmaker_wait_seconds", "p50"], ["matchmaker_wait_seconds", "p99"]] },
  { id: "chat", title: "Chat deliveries/s", lines: [["chat_messages_delivered_total", "rate"]] },
  { id: "http", title: "HTTP requests/s", lines: [["http_request_duration_seconds", "rate"]] },
  { id: "db_commits", title: "Database commits/s", lines: [["db_group_commit_duration_seconds", "rate"]] },
  { id: "db_latency", title: "Database commit p50 / p99, operation p99 (ms)", lines: [["db_group_commit_duration_seconds", "p50", 1000], ["db_group_commit_duration_seconds", "p99", 1000], ["db_operation_duration_seconds", "p99", 1000]] },
  { id: "db_batch", title: "Writes per group commit p50 / p99", lines: [["db_group_commit_size", "p50"], ["db_group_commit_size", "p99"]] },
  { id: "links", title: "Invite links: redirects/s and creates/s", lines: [["links_redirects_total", "rate"], ["links_creates_total", "rate"]] },
  { id: "world", title: "World: towers and creeps by shard, subscribers", lines: [["world_towers", "value"], ["world_creeps", "value"], ["world_subscribers", "value"]] },
  { id: "world_tick", title: "World tick p50 / p99 (ms)", lines: [["world_tick_seconds", "p50", 1000], ["world_tick_seconds", "p99", 1000]] },
  { id: "world_checkpoints", title: "World checkpoints/s and their p99 (s)", lines: [["world_checkpoint_seconds", "rate"], ["world_checkpoint_seconds", "p99"]] },
  { id: "world_checkpoint_age", title: "World: seconds since each shard's last checkpoint", lines: [["world_last_checkpoint_timestamp_seconds", "age"]] },
  { id: "memory", title: "Resident memory (MB)", lines: [["process_resident_memory_bytes", "value", 1 / 1048576]] },
  { id: "cpu", title: "CPU (cores busy)", lines: [["process_cpu_seconds_total", "rate"]] },
];

const COLORS = ["#3b5bdb", "#e8590c", "#2f9e44", "#c2255c", "#7048e8", "#1098ad", "#f08c00", "#495057"];

function seriesName(node, s) {
  const labels = s.labels.map(([k, v]) => `${k}=${v}`).join(",");
  return [node, s.metric + (labels ? `{${labels}}` : ""), s.stat].join(" ");
}

// What each range asks the server for: a chart is 720 pixels wide, so no range needs more than
// ~720 points (the server keeps an hour at 1 s and a week at 1 min, and merges the rest).
const RANGES = {
  minutes: { label: "Last 5 minutes, every second", resolution: "second", every: 1, span: 300, pollMs: 2000 },
  hour: { label: "Last hour, every 5 seconds", resolution: "second", every: 5, span: 3600, pollMs: 5000 },
  week: { label: "Last 7 days, every 15 minutes", resolution: "minute", every: 15, span: 604800, pollMs: 60000 },
};

async function statusPage() {
  const rangeName = RANGES[sessionStorage.getItem("range")] ? sessionStorage.getItem("range") : "minutes";
  const range = RANGES[rangeName];
  const select = el("select", { id: "range", on: { change: (e) => { sessionStorage.setItem("range", e.target.value); route(); } } },
    Object.entries(RANGES).map(([name, r]) => el("option", { value: name }, r.label)));
  select.value = rangeName;
  const nodes = el("span", { id: "nodes", class: "muted" });
  const grid = el("div", { class: "charts" });
  view().replaceChildren(el("div", { class: "toolbar" }, el("h2", {}, "Status"), select, nodes), grid);
  // Every series of every node, by name: {node, key, start, step, points}.
  const series = new Map();
  let after = 0;
  const resolution = range.resolution;
  const keep = Math.ceil(range.span / (range.every * (resolution === "minute" ? 60 : 1)));
  const charts = CHARTS.map((def) => {
    const canvas = el("canvas", { width: 720, height: 280 });
    const legend = el("div", { class: "legend" });
    const box = el("div", { class: "chart", dataset: { chart: def.id, points: "0" } }, el("h3", {}, def.title), canvas, legend);
    grid.append(box);
    return { def, canvas, legend, box };
  });
  async function poll() {
    const answer = await api("GET", `/api/status?resolution=${resolution}&every=${range.every}&span=${range.span}&after=${after}`);
    let end = after;
    const failed = [];
    for (const { node, window, error } of answer.nodes) {
      if (!window) {
        failed.push(`${node} (${error})`);
        continue;
      }
      end = Math.max(end, window.end);
      for (const s of window.series) {
        const name = seriesName(node, s);
        let known = series.get(name);
        if (!known) {
          known = { node, key: s, start: window.start, step: window.step, points: [] };
          series.set(name, known);
        }
        // Points arrive in order after the last one asked for; gaps are nulls.
        const expected = known.start + known.points.length * known.step;
        for (let t = expected; t < window.start; t += known.step) known.points.push(null);
        known.points.push(...s.points);
        const extra = known.points.length - keep;
        if (extra > 0) {
          known.points.splice(0, extra);
          known.start += extra * known.step;
        }
      }
    }
    after = end;
    nodes.textContent = `nodes: ${answer.nodes.filter((n) => n.window).map((n) => n.node).join(", ")}` +
      (failed.length ? ` · not answering: ${failed.join(", ")}` : "");
    for (const chart of charts) draw(chart, series, end);
  }
  const root = view();
  await poll();
  // The operator may have moved on while the first answer came.
  if (root !== state.root) return;
  state.timer = setInterval(() => poll().catch(() => {}), range.pollMs);
}

function draw({ def, canvas, legend, box }, series, end) {
  const lines = [];
  for (const [metric, stat, scale = 1] of def.lines) {
    for (const s of series.values()) {
      if (s.key.metric === metric && s.key.stat === stat) lines.push({ s, scale });
    }
  }
  const ctx = canvas.getContext("2d");
  const { width, height } = canvas;
  ctx.clearRect(0, 0, width, height);
  legend.replaceChildren();
  let max = 0;
  let first = Infinity;
  let counted = 0;
  for (const { s, scale } of lines) {
    first = Math.min(first, s.start);
    let n = 0;
    for (const v of s.points) if (v !== null) { max = Math.max(max, v * scale); n++; }
    counted = Math.max(counted, n);
  }
  box.dataset.points = String(counted);
  max = max > 0 ? max * 1.1 : 1;
  const span = Math.max(end - first, 1);
  const pad = 34;
  ctx.fillStyle = "#868e96";
  ctx.font = "20px system-ui";
  ctx.fillText(formatNumber(max), 2, 20);
  ctx.fillText("0", 2, height - 4);
  lines.forEach(({ s, scale }, i) => {
    const color = COLORS[i % COLORS.length];
    ctx.strokeStyle = color;
    ctx.lineWidth = 2;
    ctx.beginPath();
    let drawing = false;
    s.points.forEach((v, j) => {
      if (v === null) { drawing = false; return; }
      const x = pad + ((s.start + j * s.step - first) / span) * (width - pad - 4);
      const y = height - 4 - ((v * scale) / max) * (height - 28);
      if (drawing) ctx.lineTo(x, y); else ctx.moveTo(x, y);
      drawing = true;
    });
    ctx.stroke();
    const last = newest(s.points);
    const labels = s.key.labels.map(([, v]) => v).join(",");
    const swatch = el("i");
    swatch.style.background = color; // a property, not an attribute: the policy allows no inline style
    legend.append(el("span", {}, swatch,
      `${s.key.metric}${labels ? ` ${labels}` : ""} ${s.key.stat}: ${last === undefined ? "–" : formatNumber(last * scale)}`,
      series.size && new Set([...series.values()].map((x) => x.node)).size > 1 ? ` (${s.node})` : ""));
  });
  if (!lines.length) legend.append(el("span", { class: "muted" }, "no data yet"));
}

// A series' newest point that holds a value (undefined when none does).
function newest(points) {
  for (let i = points.length - 1; i >= 0; i--) if (points[i] !== null) return points[i];
  return undefined;
}

function formatNumber(v) {
  if (Math.abs(v) >= 100) return Math.round(v).toLocaleString("en");
  return Number(v.toPrecision(3)).toString();
}

// --- players ---------------------------------------------------------------------------------

async function playersPage(id) {
  if (id) return accountPage(id);
  const input = el("input", { id: "player-search", placeholder: "id, username, display name, device id, email or custom id", value: sessionStorage.getItem("q") || "" });
  const results = el("div", { id: "player-results" });
  const form = el("form", { class: "toolbar", on: { submit: (e) => { e.preventDefault(); search(null).catch(showError); } } },
    input, el("button", { type: "submit" }, "Search"));
  view().replaceChildren(el("h2", {}, "Players"), form, results);
  // Only the latest search draws its answer: an earlier one that answers later is dropped.
  let latest = 0;
  async function search(after) {
    const mine = ++latest;
    sessionStorage.setItem("q", input.value);
    const answer = await api("GET", `/api/accounts?q=${encodeURIComponent(input.value)}${after ? `&after=${encodeURIComponent(after)}` : ""}`);
    if (mine !== latest) return;
    const rows = answer.accounts.map((a) => el("tr", {},
      el("td", {}, el("a", { href: `#players/${a.id}` }, a.username)), el("td", {}, a.display_name),
      el("td", {}, a.id), el("td", {}, a.online ? "online" : ""), el("td", {}, a.banned ? "banned" : "")));
    results.replaceChildren(table("accounts", ["Username", "Display name", "Id", "", ""], rows),
      answer.accounts.length ? "" : el("p", { class: "muted" }, "No player found."),
      answer.next ? el("button", { on: { click: () => search(answer.next).catch(showError) } }, "Next page") : "");
  }
  await search(null);
}

async function accountPage(id) {
  const root = view();
  const data = await api("GET", `/api/accounts/${encodeURIComponent(id)}`);
  const { account } = data;
  const user = account.user || {};
  const act = async (method, path, body, done) => {
    try {
      await api(method, path, body);
      if (done) done(); else route();
    } catch (e) {
      showError(e);
    }
  };
  const base = `/api/accounts/${encodeURIComponent(id)}`;
  const profile = el("div", { class: "card", id: "profile" },
    el("h3", {}, user.username), el("p", {}, "Display name: ", user.display_name || "–"),
    el("p", {}, "Id: ", user.id), el("p", {}, "Email: ", account.email || "–", " · Custom id: ", account.custom_id || "–"),
    el("p", {}, "Devices: ", (account.devices || []).map((d) => d.id).join(", ") || "–"),
    el("p", { id: "identities" }, "Linked identities: ", [["Apple", "apple_id"], ["Google", "google_id"], ["Facebook", "facebook_id"],
      ["Facebook Instant Games", "facebook_instant_game_id"], ["Steam", "steam_id"], ["Game Center", "gamecenter_id"]]
      .filter(([, field]) => user[field]).map(([name, field]) => `${name} ${user[field]}`).join(" · ") || "–"),
    el("p", {}, "Created: ", user.create_time || "", account.disable_time ? ` · banned ${account.disable_time}` : ""),
    el("p", {}, data.online ? "Online" : "Offline"));
  const sessions = el("div", { class: "card", id: "sessions" }, el("h3", {}, "Sockets on this node"),
    data.sessions.length ? table("session-list", ["Session", "Format", "Status"], data.sessions.map((s) => el("tr", {}, el("td", {}, s.session_id), el("td", {}, s.format), el("td", {}, s.status === null || s.status === undefined ? "–" : s.status)))) : el("p", { class: "muted" }, "none"),
    canChange() ? el("button", { id: "end-sessions", on: { click: () => act("POST", `${base}/sessions/end`, {}) } }, "End sessions (every node)") : "");
  const wallet = formJson(account.wallet || "{}", "The wallet");
  const walletForm = el("form", { id: "wallet-form", on: { submit: (e) => {
    e.preventDefault();
    const f = e.target;
    act("POST", `${base}/wallet`, { changeset: { [f.currency.value]: Number(f.amount.value) }, reason: f.reason.value });
  } } },
  el("label", {}, "Currency", el("input", { name: "currency", required: "" })),
  el("label", {}, "Amount (negative takes)", el("input", { name: "amount", type: "number", required: "" })),
  el("label", {}, "Reason", el("input", { name: "reason" })),
  el("button", { type: "submit" }, "Change wallet"));
  const walletCard = el("div", { class: "card", id: "wallet" }, el("h3", {}, "Wallet"),
    table("balances", ["Currency", "Balance"], Object.entries(wallet).map(([c, v]) => el("tr", {}, el("td", {}, c), el("td", {}, String(v))))),
    canChange() ? walletForm : "");
  const ledger = el("div", { class: "card", id: "ledger" }, el("h3", {}, "Ledger"),
    table("ledger-rows", ["Id", "When", "Reason", "Changes", "Metadata"], data.ledger.map((e) => el("tr", { dataset: { ledger: String(e.id) } },
      el("td", {}, String(e.id)), el("td", {}, new Date(e.time).toISOString()), el("td", {}, e.reason),
      el("td", {}, el("pre", {}, JSON.stringify(e.changes))), el("td", {}, el("pre", {}, JSON.stringify(e.metadata)))))));
  const inventory = el("div", { class: "card" }, el("h3", {}, "Inventory"),
    table("inventory", ["Item", "Kind", "Count"], data.inventory.map((i) => el("tr", {}, el("td", {}, i.item_id), el("td", {}, i.kind), el("td", {}, String(i.count))))));
  const friends = el("div", { class: "card" }, el("h3", {}, "Friends"),
    table("friends", ["User", "State"], (data.friends.friends || []).map((f) => el("tr", {}, el("td", {}, el("a", { href: `#players/${f.user.id}` }, f.user.username)), el("td", {}, String(f.state))))));
  const groups = el("div", { class: "card" }, el("h3", {}, "Groups"),
    table("groups", ["Group", "State"], (data.groups.user_groups || []).map((g) => el("tr", {}, el("td", {}, g.group.name), el("td", {}, String(g.state))))));
  const notifyForm = el("form", { id: "notify-form", on: { submit: (e) => {
    e.preventDefault();
    const f = e.target;
    act("POST", `${base}/notify`, { subject: f.subject.value, content: f.content.value || "{}", code: Number(f.code.value || 0), persistent: true });
  } } },
  el("label", {}, "Subject", el("input", { name: "subject", required: "" })),
  el("label", {}, "Content (a JSON object)", el("input", { name: "content", value: "{}" })),
  el("label", {}, "Code", el("input", { name: "code", type: "number", value: "0" })),
  el("button", { type: "submit" }, "Send notification"));
  const notifications = el("div", { class: "card" }, el("h3", {}, "Notifications"),
    table("notifications", ["Subject", "Code", "Content"], (data.notifications.notifications || []).map((n) => el("tr", {}, el("td", {}, n.subject), el("td", {}, String(n.code)), el("td", {}, el("pre", {}, n.content))))),
    canChange() ? notifyForm : "");
  const metadata = el("textarea", { id: "metadata", rows: 4, cols: 60 });
  metadata.value = user.metadata || "{}";
  const manage = el("div", { class: "card", id: "manage" }, el("h3", {}, "Metadata and account"), metadata,
    canChange() ? el("div", { class: "toolbar" },
      el("button", { id: "save-metadata", on: { click: () => act("POST", `${base}/metadata`, { metadata: metadata.value }) } }, "Save metadata"),
      account.disable_time
        ? el("button", { id: "unban", on: { click: () => act("POST", `${base}/unban`, {}) } }, "Unban")
        : el("button", { id: "ban", class: "danger", on: { click: () => act("POST", `${base}/ban`, {}) } }, "Ban"),
      el("a", { href: `${base}/export`, download: `account-${id}.json` }, "Export (JSON)"),
      el("button", { id: "delete-account", class: "danger", on: { click: () => confirm(`Delete ${user.username} and everything they own?`) && act("DELETE", base, undefined, () => { location.hash = "#players"; }) } }, "Delete account")) : "");
  const storage = el("div", { class: "card", id: "player-storage" }, el("h3", {}, "Storage objects"),
    pagedTable("player-objects", ["Collection", "Key", "Version", "Read", "Write", "Size", "Value"], data.storage, data.storage_cursor,
      (o) => el("tr", {}, el("td", {}, o.collection), el("td", {}, o.key), el("td", {}, o.version), el("td", {}, String(o.permission_read)),
        el("td", {}, String(o.permission_write)), el("td", {}, String(o.size)), el("td", {}, el("pre", {}, o.value))),
      async (cursor) => { const page = await api("GET", `${base}/storage?cursor=${encodeURIComponent(cursor)}`); return [page.objects, page.cursor]; }));
  const messages = el("div", { class: "card", id: "player-messages" }, el("h3", {}, "Chat messages (newest first)"),
    pagedTable("player-message-list", ["When", "Channel", "Content"], data.messages, data.messages_before,
      (m) => el("tr", {}, el("td", {}, m.create_time || ""), el("td", {}, el("a", { href: "#chat", on: { click: () => sessionStorage.setItem("channel", m.channel_id) } }, m.channel_id)), el("td", {}, el("pre", {}, m.content))),
      async (before) => { const page = await api("GET", `${base}/messages?before=${encodeURIComponent(before)}`); return [page.messages, page.before]; }));
  // Validated purchases and subscriptions (times as pbjson writes them: RFC 3339), and a
  // lookup of any purchase by its transaction id.
  const when = (time) => time || "–";
  const lookupResult = el("pre", { id: "purchase-found" });
  const lookup = el("form", { id: "purchase-lookup", on: { submit: async (e) => {
    e.preventDefault();
    try {
      const found = await api("GET", `/api/purchases/${encodeURIComponent(e.target.transaction.value)}`);
      lookupResult.textContent = JSON.stringify(found, null, 2);
    } catch (err) {
      lookupResult.textContent = err.status === 404 ? "No purchase has that transaction id." : String(err.message || err);
    }
  } } }, el("label", {}, "Transaction id", el("input", { name: "transaction", required: "" })), el("button", { type: "submit" }, "Look up"));
  const purchases = el("div", { class: "card", id: "player-purchases" }, el("h3", {}, "Purchases"),
    table("purchase-list", ["Transaction", "Product", "Store", "Purchased", "Refunded", "Environment"], (data.purchases.validated_purchases || []).map((p) => el("tr", {},
      el("td", {}, p.transaction_id), el("td", {}, p.product_id), el("td", {}, p.store || "APPLE_APP_STORE"), el("td", {}, when(p.purchase_time)), el("td", {}, when(p.refund_time)), el("td", {}, p.environment || "UNKNOWN")))),
    lookup, lookupResult);
  const subscriptions = el("div", { class: "card", id: "player-subscriptions" }, el("h3", {}, "Subscriptions"),
    table("subscription-list", ["Original transaction", "Product", "Store", "Expires", "Active", "Refunded"], (data.subscriptions.validated_subscriptions || []).map((s) => el("tr", {},
      el("td", {}, s.original_transaction_id), el("td", {}, s.product_id), el("td", {}, s.store || "APPLE_APP_STORE"), el("td", {}, when(s.expiry_time)), el("td", {}, s.active ? "yes" : "no"), el("td", {}, when(s.refund_time))))));
  root.replaceChildren(el("h2", {}, "Player ", user.username), profile, sessions, walletCard, ledger, inventory, storage, messages, friends, groups, notifications, purchases, subscriptions, manage);
}

// A table of rows with a "More" button while `next` (a cursor) says there are more.
function pagedTable(id, headings, rows, next, row, more) {
  const body = el("tbody", {}, rows.map(row));
  const button = el("button", { hidden: next === null || next === undefined, on: { click: async () => {
    try {
      const [page, after] = await more(next);
      body.append(...page.map(row));
      next = after;
      button.hidden = next === null || next === undefined;
    } catch (e) {
      showError(e);
    }
  } } }, "More");
  return [el("table", { id }, el("thead", {}, el("tr", {}, headings.map((h) => el("th", {}, h)))), body), button];
}

// --- storage ---------------------------------------------------------------------------------

async function storagePage() {
  const collection = el("input", { id: "storage-collection", placeholder: "collection", value: sessionStorage.getItem("collection") || "" });
  const owner = el("input", { id: "storage-owner", placeholder: "owner (user id; empty: every owner)", value: sessionStorage.getItem("owner") || "" });
  const results = el("div", { id: "storage-results" });
  const editor = el("div", { id: "storage-editor" });
  const form = el("form", { class: "toolbar", on: { submit: (e) => { e.preventDefault(); list(null).catch(showError); } } },
    collection, owner, el("button", { type: "submit" }, "List"));
  view().replaceChildren(el("h2", {}, "Storage"), form, results, editor);
  let latest = 0;
  async function list(cursor) {
    const mine = ++latest;
    sessionStorage.setItem("collection", collection.value);
    sessionStorage.setItem("owner", owner.value);
    if (!collection.value) return;
    const answer = await api("GET", `/api/storage?collection=${encodeURIComponent(collection.value)}&owner=${encodeURIComponent(owner.value)}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    if (mine !== latest) return;
    results.replaceChildren(table("objects", ["Key", "Owner", "Version", "Size", "Value"], answer.objects.map((o) => el("tr", {},
      el("td", {}, el("a", { href: "#", on: { click: (e) => { e.preventDefault(); edit(o).catch(showError); } } }, o.key)),
      el("td", {}, o.user_id || "(system)"), el("td", {}, o.version), el("td", {}, String(o.size)), el("td", {}, el("pre", {}, o.value))))),
    answer.cursor ? el("button", { on: { click: () => list(answer.cursor).catch(showError) } }, "Next page") : "");
  }
  async function edit(o) {
    const object = await api("GET", `/api/storage/object?collection=${encodeURIComponent(o.collection)}&key=${encodeURIComponent(o.key)}&owner=${encodeURIComponent(o.user_id || "")}`);
    const value = el("textarea", { id: "storage-value", rows: 10, cols: 80 });
    value.value = object.value;
    const status = el("p", { id: "storage-status" });
    editor.replaceChildren(el("div", { class: "card" }, el("h3", {}, `${object.collection} / ${object.key}`),
      el("p", { class: "muted" }, `owner ${object.user_id || "(system)"} · version `, el("code", { id: "storage-version" }, object.version)),
      value, status,
      canChange() ? el("button", { id: "storage-save", on: { click: async () => {
        try {
          const saved = await api("POST", "/api/storage/object", {
            collection: object.collection, key: object.key, owner: object.user_id || "", value: value.value,
            version: object.version, permission_read: object.permission_read, permission_write: object.permission_write,
          });
          object.version = saved.version;
          document.getElementById("storage-version").textContent = saved.version;
          status.className = "";
          status.textContent = "Saved.";
        } catch (e) {
          status.className = "error";
          status.textContent = e.message;
        }
      } } }, "Save") : ""));
  }
  await list(null);
}

// --- runtime and API explorer -------------------------------------------------------------------

async function runtimePage() {
  const root = view();
  const { functions, hooks, javascript } = await api("GET", "/api/runtime");
  const rows = functions.map((f) => el("tr", { dataset: { function: f.id } },
    el("td", {}, f.id),
    el("td", {}, Object.entries(f.calls).map(([outcome, n]) => `${outcome}: ${n}`).join(", ") || "–"),
    el("td", {}, f.last_error ? `${new Date(f.last_error.time).toISOString()} ${f.last_error.code}: ${f.last_error.message}` : "–")));
  const id = el("select", { id: "rpc-id" }, functions.map((f) => el("option", { value: f.id }, f.id)));
  const user = el("input", { id: "rpc-user", placeholder: "user id (empty: as the server)" });
  const payload = el("textarea", { id: "rpc-payload", rows: 4, cols: 60 });
  const answer = el("pre", { id: "rpc-answer" });
  const explorer = el("div", { class: "card" }, el("h3", {}, "API explorer"), id, user, payload,
    canChange() ? el("button", { id: "rpc-call", on: { click: async () => {
      try {
        const result = await api("POST", `/api/runtime/${encodeURIComponent(id.value)}/call`, { user_id: user.value, payload: payload.value });
        answer.textContent = result.error ? `error ${result.error.code}: ${result.error.message}` : result.payload;
      } catch (e) {
        answer.textContent = `refused: ${e.message}`;
      }
    } } }, "Call") : "", answer);
  root.replaceChildren(el("h2", {}, "Runtime"), el("p", { class: "muted" }, javascript ? "A JavaScript module is loaded." : "No JavaScript module."),
    table("functions", ["Function", "Calls on this node", "Last error"], rows),
    el("h3", {}, "Hooks and match handlers"),
    hooks.length ? table("hooks", ["Kind", "Name", "Calls on this node", "Last error"], hooks.map((h) => el("tr", {},
      el("td", {}, h.table), el("td", {}, h.hook),
      el("td", {}, Object.entries(h.calls).map(([outcome, n]) => `${outcome}: ${n}`).join(", ") || "–"),
      el("td", {}, h.last_error ? `${new Date(h.last_error.time).toISOString()} ${h.last_error.code}: ${h.last_error.message}` : "–"))))
      : el("p", { id: "hooks", class: "muted" }, "No hook registered."),
    el("p"), explorer);
}

// --- invite links -------------------------------------------------------------------------------

async function linksPage() {
  const code = el("input", { id: "link-code", placeholder: "a link's code" });
  const result = el("div", { id: "link-result" });
  const form = el("form", { class: "toolbar", on: { submit: (e) => { e.preventDefault(); show().catch((err) => { result.replaceChildren(el("p", { class: "error" }, err.message)); }); } } },
    code, el("button", { type: "submit" }, "Look up"));
  view().replaceChildren(el("h2", {}, "Invite links"), el("p", { class: "muted" }, "Redirects and creations per second are on the status page."), form, result);
  async function show() {
    const link = await api("GET", `/api/links/${encodeURIComponent(code.value)}`);
    result.replaceChildren(el("div", { class: "card" },
      el("h3", {}, link.code), el("p", {}, "To: ", link.url), el("p", {}, `Owner ${link.owner} · ${link.visits} visits`, link.disabled ? " · disabled" : ""),
      table("link-clicks", ["Day", "Clicks"], link.clicks.map(([day, n]) => el("tr", {}, el("td", {}, new Date(day * 86400000).toISOString().slice(0, 10)), el("td", {}, String(n))))),
      canChange() && !link.disabled ? el("button", { class: "danger", on: { click: async () => {
        try { await api("DELETE", `/api/links/${encodeURIComponent(link.code)}`); await show(); } catch (e) { showError(e); }
      } } }, "Disable") : ""));
  }
}

// --- chat --------------------------------------------------------------------------------------

async function chatPage() {
  const channel = el("input", { id: "chat-channel", placeholder: "room name, or a channel id (2...room, 3.group.., 4..one.two)", value: sessionStorage.getItem("channel") || "" });
  const results = el("div", { id: "chat-results" });
  const form = el("form", { class: "toolbar", on: { submit: (e) => { e.preventDefault(); list(null).catch(showError); } } },
    channel, el("button", { type: "submit" }, "Show messages"));
  view().replaceChildren(el("h2", {}, "Chat"), form, results);
  let latest = 0;
  async function list(cursor) {
    const mine = ++latest;
    sessionStorage.setItem("channel", channel.value);
    if (!channel.value) return;
    const page = await api("GET", `/api/chat/messages?channel=${encodeURIComponent(channel.value)}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    if (mine !== latest) return;
    results.replaceChildren(el("p", { class: "muted" }, `channel ${page.channel_id}, newest first`),
      table("messages", ["When", "Sender", "Content"], (page.messages || []).map((m) => el("tr", {},
        el("td", {}, m.create_time || ""), el("td", {}, el("a", { href: `#players/${m.sender_id}` }, m.username || m.sender_id)),
        el("td", {}, el("pre", {}, m.content))))),
      page.next_cursor ? el("button", { on: { click: () => list(page.next_cursor).catch(showError) } }, "Older messages") : "");
  }
  await list(null);
}

// --- groups ------------------------------------------------------------------------------------

async function groupsPage(id) {
  const root = view();
  if (id) {
    const { group_users } = await api("GET", `/api/groups/${encodeURIComponent(id)}/users`);
    root.replaceChildren(el("h2", {}, "Group members"),
      table("group-users", ["User", "State"], (group_users || []).map((g) => el("tr", {},
        el("td", {}, el("a", { href: `#players/${g.user.id}` }, g.user.username)), el("td", {}, String(g.state))))));
    return;
  }
  const name = el("input", { id: "group-name", placeholder: "name starts with (empty: all, largest first)" });
  const results = el("div");
  const form = el("form", { class: "toolbar", on: { submit: (e) => { e.preventDefault(); list("").catch(showError); } } },
    name, el("button", { type: "submit" }, "List"));
  root.replaceChildren(el("h2", {}, "Groups"), form, results);
  let latest = 0;
  async function list(cursor) {
    const mine = ++latest;
    const page = await api("GET", `/api/groups?name=${encodeURIComponent(name.value)}&cursor=${encodeURIComponent(cursor)}`);
    if (mine !== latest) return;
    results.replaceChildren(table("groups-list", ["Name", "Members", "Open", "Description"], (page.groups || []).map((g) => el("tr", {},
      el("td", {}, el("a", { href: `#groups/${g.id}` }, g.name)), el("td", {}, `${g.edge_count} / ${g.max_count}`),
      el("td", {}, g.open ? "open" : "closed"), el("td", {}, g.description || "")))),
    page.cursor ? el("button", { on: { click: () => list(page.cursor).catch(showError) } }, "Next page") : "");
  }
  await list("");
}

// --- leaderboards ----------------------------------------------------------------------------

async function leaderboardsPage(id) {
  const root = view();
  if (id) return recordsPage(id);
  const { leaderboards } = await api("GET", "/api/leaderboards");
  root.replaceChildren(el("h2", {}, "Leaderboards and tournaments"),
    table("boards", ["Id", "Kind", "Order", "Operator", "Reset", "Metadata"], leaderboards.map((b) => el("tr", {},
      el("td", {}, el("a", { href: `#leaderboards/${encodeURIComponent(b.id)}` }, b.id)),
      el("td", {}, b.tournament ? `tournament: ${b.title || ""}` : "leaderboard"),
      el("td", {}, String(b.sort_order)), el("td", {}, String(b.operator)),
      el("td", {}, b.reset_schedule || "never"), el("td", {}, el("pre", {}, b.metadata || ""))))));
}

async function recordsPage(id) {
  const body = el("tbody");
  const more = el("button", { hidden: true }, "Next page");
  const root = view();
  const { leaderboards } = await api("GET", "/api/leaderboards");
  const board = leaderboards.find((b) => b.id === id);
  const metadata = el("textarea", { id: "board-metadata", rows: 4, cols: 60 });
  metadata.value = (board && board.metadata) || "{}";
  const saved = el("span", { id: "board-metadata-status" });
  const editor = el("div", { class: "card" }, el("h3", {}, "Metadata"), metadata,
    canChange() ? el("div", { class: "toolbar" }, el("button", { id: "save-board-metadata", on: { click: async () => {
      try {
        await api("POST", `/api/leaderboards/${encodeURIComponent(id)}/metadata`, { metadata: metadata.value });
        saved.className = "";
        saved.textContent = "Saved.";
      } catch (e) {
        saved.className = "error";
        saved.textContent = e.message;
      }
    } } }, "Save metadata"), saved) : "");
  root.replaceChildren(el("h2", {}, "Records of ", id), editor,
    el("table", { id: "records" }, el("thead", {}, el("tr", {}, ["Rank", "Owner", "Score", "Subscore", "Submissions", "Metadata", ""].map((h) => el("th", {}, h)))), body), more);
  let cursor = null;
  async function page() {
    const list = await api("GET", `/api/leaderboards/${encodeURIComponent(id)}/records${cursor ? `?cursor=${encodeURIComponent(cursor)}` : ""}`);
    for (const r of list.records || []) {
      const row = el("tr", {}, el("td", {}, String(r.rank)), el("td", {}, el("a", { href: `#players/${r.owner_id}` }, r.username || r.owner_id)),
        el("td", {}, String(r.score)), el("td", {}, String(r.subscore)), el("td", {}, String(r.num_score)), el("td", {}, el("pre", {}, r.metadata || "")),
        el("td", {}, canChange() ? el("button", { class: "danger", on: { click: async () => {
          if (!confirm(`Delete ${r.username || r.owner_id}'s record?`)) return;
          try { await api("DELETE", `/api/leaderboards/${encodeURIComponent(id)}/records/${r.owner_id}`); row.remove(); } catch (e) { showError(e); }
        } } }, "Delete") : ""));
      body.append(row);
    }
    cursor = list.next_cursor;
    more.hidden = !cursor;
  }
  more.addEventListener("click", () => page().catch(showError));
  await page();
}

// --- matches and rooms -----------------------------------------------------------------------

async function matchesPage(id) {
  if (id) return matchPage(id);
  const root = view();
  const { matches, rooms } = await api("GET", "/api/matches");
  const answer = el("pre", { id: "signal-answer" });
  const log = el("pre", { id: "room-log", class: "card" });
  root.replaceChildren(el("h2", {}, "Matches"),
    table("matches", ["Match", "Kind", "Handler", "Label", "Players", "Tick rate", ""], matches.map((m) => {
      const data = el("input", { placeholder: "signal data" });
      return el("tr", {}, el("td", {}, el("a", { href: `#matches/${encodeURIComponent(m.match_id)}` }, m.match_id)), el("td", {}, m.authoritative ? "authoritative" : "relayed"),
        el("td", {}, m.handler_name || ""), el("td", {}, el("pre", {}, m.label || "")), el("td", {}, String(m.size)), el("td", {}, String(m.tick_rate || "")),
        el("td", {}, m.authoritative && canChange() ? [data, el("button", { on: { click: async () => {
          try { answer.textContent = (await api("POST", `/api/matches/${encodeURIComponent(m.match_id)}/signal`, { data: data.value })).data; } catch (e) { answer.textContent = `refused: ${e.message}`; }
        } } }, "Signal")] : ""));
    })), answer,
    el("h2", {}, "Rooms on this node"),
    table("rooms", ["Room", "Handler", "Players", "Capacity", "Tick rate", "Label", "Created"], rooms.map((r) => el("tr", {},
      el("td", {}, r.room_id, " ", el("button", { on: { click: async () => {
        try { log.textContent = (await api("GET", `/api/rooms/${encodeURIComponent(r.room_id)}/log`)).output || "(no output yet)"; } catch (e) { log.textContent = e.status === 404 ? "Not a game server's room." : e.message; }
      } } }, "Log")), el("td", {}, r.handler), el("td", {}, String(r.players)), el("td", {}, String(r.capacity)),
      el("td", {}, String(r.tick_rate_hz)), el("td", {}, el("pre", {}, r.label || "")), el("td", {}, new Date(r.created_at_ms).toISOString())))), log);
}

// --- configuration ----------------------------------------------------------------------------

async function configPage() {
  const root = view();
  const config = await api("GET", "/api/config");
  root.replaceChildren(el("h2", {}, "Configuration in force"), el("p", { class: "muted" }, "Secrets are redacted."),
    el("pre", { id: "config", class: "card" }, JSON.stringify(config, null, 2)));
}

// --- cluster ---------------------------------------------------------------------------------

async function clusterPage() {
  const root = view();
  const [info, status] = await Promise.all([api("GET", "/api/cluster"), api("GET", "/api/status?resolution=second&every=1&span=15&after=0")]);
  // Each node's health: whether it answered, and its newest figures.
  const health = new Map(status.nodes.map(({ node, window, error }) => {
    const latest = (metric, stat, scale = 1) => {
      const s = window && window.series.find((x) => x.metric === metric && x.stat === stat);
      const v = s && newest(s.points);
      return v === undefined || v === null ? "–" : formatNumber(v * scale);
    };
    return [node, window
      ? [el("td", {}, "answering"), el("td", {}, latest("users_online", "value")), el("td", {}, latest("sockets_open", "value")),
        el("td", {}, latest("process_cpu_seconds_total", "rate")), el("td", {}, latest("process_resident_memory_bytes", "value", 1 / 1048576))]
      : [el("td", { class: "error" }, `not answering: ${error}`), el("td"), el("td"), el("td"), el("td")]];
  }));
  const row = (name, label, since) => el("tr", {}, el("td", {}, label), el("td", {}, since), health.get(name) || [el("td", {}, "–"), el("td"), el("td"), el("td"), el("td")]);
  root.replaceChildren(el("h2", {}, "Cluster"),
    el("p", {}, `This node: ${info.node} (Muster ${info.version}), ${info.sockets} sockets`, info.clustered ? "" : " — not clustered"),
    table("cluster-nodes", ["Node", "Heard of since", "Status data", "Players online", "Sockets", "CPU (cores)", "Memory (MB)"],
      [row(info.node, `${info.node} (this node)`, "–")].concat(info.peers.map((p) => row(p.node, p.node, new Date(p.seen_since).toISOString())))),
    el("h3", {}, "Latest departures"),
    table("departures", ["Node", "Why", "When"], info.departures.map((d) => el("tr", {}, el("td", {}, d.node), el("td", {}, d.why), el("td", {}, new Date(d.time).toISOString())))));
}

// --- audit log -------------------------------------------------------------------------------

async function auditPage() {
  const body = el("tbody");
  const more = el("button", { id: "audit-more", hidden: true }, "Older entries");
  view().replaceChildren(el("h2", {}, "Audit log"),
    el("table", { id: "audit" }, el("thead", {}, el("tr", {}, ["When", "Who", "What", "On", "Details"].map((h) => el("th", {}, h)))), body), more);
  let before = null;
  async function page() {
    const answer = await api("GET", `/api/audit?limit=50${before ? `&before=${before}` : ""}`);
    for (const entry of answer.entries) {
      body.append(el("tr", { dataset: { action: entry.action } },
        el("td", {}, new Date(entry.time).toISOString()), el("td", {}, entry.username),
        el("td", {}, entry.action), el("td", {}, entry.target),
        el("td", {}, el("pre", {}, JSON.stringify(entry.detail)))));
    }
    before = answer.next;
    more.hidden = !before;
  }
  more.addEventListener("click", () => page().catch(showError));
  await page();
}

// --- console users -----------------------------------------------------------------------------

async function usersPage() {
  const root = view();
  const { users } = await api("GET", "/api/users");
  const body = el("tbody", {}, users.map((u) => el("tr", {},
    el("td", {}, u.username), el("td", {}, u.role), el("td", {}, new Date(u.create_time * 1000).toISOString()),
    el("td", {}, el("button", { class: "danger", on: { click: () => removeUser(u.username) } }, "Delete")))));
  const form = el("form", { id: "new-user", class: "card", on: { submit: addUser } },
    el("h3", {}, "Add a console user"),
    el("label", {}, "Username", el("input", { name: "username", required: "" })),
    el("label", {}, "Password", el("input", { name: "password", type: "password", required: "" })),
    el("label", {}, "Role", el("select", { name: "role" }, ["readonly", "developer", "admin"].map((r) => el("option", { value: r }, r)))),
    el("button", { type: "submit" }, "Add"));
  root.replaceChildren(el("h2", {}, "Console users"),
    el("table", { id: "users" }, el("thead", {}, el("tr", {}, ["Username", "Role", "Created", ""].map((h) => el("th", {}, h)))), body), el("p"), form);
}

async function addUser(event) {
  event.preventDefault();
  const form = event.target;
  try {
    await api("POST", "/api/users", { username: form.username.value, password: form.password.value, role: form.role.value });
    route();
  } catch (e) {
    showError(e);
  }
}

async function removeUser(username) {
  if (!confirm(`Delete console user ${username}?`)) return;
  try {
    await api("DELETE", `/api/users/${encodeURIComponent(username)}`);
    route();
  } catch (e) {
    showError(e);
  }
}

// --- start -------------------------------------------------------------------------------------

document.addEventListener("DOMContentLoaded", async () => {
  document.getElementById("login").addEventListener("submit", login);
  document.getElementById("logout").addEventListener("click", logout);
  window.addEventListener("hashchange", route);
  try {
    loggedIn(await api("GET", "/api/me"));
  } catch {
    showLogin();
  }
});

// --- one match: its presences, state, signal and kick ---------------------------------------------

async function matchPage(id) {
  const root = view();
  const m = await api("GET", `/api/matches/${encodeURIComponent(id)}`);
  const path = `/api/matches/${encodeURIComponent(id)}`;
  const answer = el("pre", { id: "match-signal-answer" });
  const data = el("input", { id: "match-signal-data", placeholder: "signal data" });
  const shownState = el("pre", { id: "match-state", class: "card" }, m.state === null || m.state === undefined ? "(this match shows no state)" : pretty(m.state));
  root.replaceChildren(el("h2", {}, "Match ", m.match_id),
    el("p", {}, m.authoritative ? `authoritative · handler ${m.handler} · tick ${m.tick} at ${m.tick_rate_hz} Hz` : "relayed",
      ` · ${m.size} players`, m.label ? ` · label ${m.label}` : ""),
    el("h3", {}, "Presences"),
    table("match-presences", ["User", "Username", "Session", "Node", ""], m.presences.map((p) => el("tr", {},
      el("td", {}, el("a", { href: `#players/${p.user_id}` }, p.user_id)), el("td", {}, p.username), el("td", {}, p.session_id), el("td", {}, p.node || ""),
      el("td", {}, canChange() ? el("button", { class: "danger", on: { click: async () => {
        if (!confirm(`Kick ${p.username} from the match?`)) return;
        try { await api("POST", `${path}/kick`, { session_id: p.session_id }); route(); } catch (e) { showError(e); }
      } } }, "Kick") : "")))),
    el("h3", {}, "State", m.state_cut ? " (cut at 256 KiB)" : ""), shownState,
    m.authoritative && canChange() ? el("div", { class: "toolbar" }, data, el("button", { id: "match-signal", on: { click: async () => {
      try { answer.textContent = (await api("POST", `${path}/signal`, { data: data.value })).data; } catch (e) { answer.textContent = `refused: ${e.message}`; }
    } } }, "Signal"), el("button", { on: { click: () => route() } }, "Refresh")) : "", answer);
}

// --- parties ---------------------------------------------------------------------------------------

async function partiesPage() {
  const root = view();
  const { node, parties } = await api("GET", "/api/parties");
  root.replaceChildren(el("h2", {}, "Parties on ", node),
    parties.length ? table("parties", ["Party", "Leader", "Members", "Open", "Hidden", "Max", "Join requests", "Label"], parties.map((p) => el("tr", {},
      el("td", {}, p.party_id), el("td", {}, (p.leader && p.leader.username) || "–"),
      el("td", {}, (p.presences || []).map((m, i) => [i ? ", " : "", el("a", { href: `#players/${m.user_id}` }, m.username)])),
      el("td", {}, p.open ? "yes" : "no"), el("td", {}, p.hidden ? "yes" : "no"), el("td", {}, String(p.max_size)),
      el("td", {}, String(p.join_requests)), el("td", {}, el("pre", {}, p.label || ""))))) : el("p", { id: "parties", class: "muted" }, "No party on this node."));
}

// --- world shards ------------------------------------------------------------------------------------

async function worldPage() {
  const root = view();
  // The last 15 seconds of every node's world series: each shard's towers, creeps and last
  // checkpoint's age, and each node's tick time and subscribers.
  const answer = await api("GET", "/api/status?resolution=second&every=1&span=15&after=0");
  const last = (s) => newest(s.points);
  const shards = new Map();
  const nodes = [];
  for (const { node, window } of answer.nodes) {
    if (!window) continue;
    const figures = {};
    for (const s of window.series) {
      if (!s.metric.startsWith("world_")) continue;
      const shard = (s.labels.find(([k]) => k === "shard") || [])[1];
      if (shard !== undefined) {
        const key = `${node} ${shard}`;
        if (!shards.has(key)) shards.set(key, { node, shard });
        shards.get(key)[s.metric] = last(s);
      } else {
        figures[`${s.metric} ${s.stat}`] = last(s);
      }
    }
    nodes.push({ node, figures });
  }
  const number = (v, scale = 1) => (v === undefined ? "–" : formatNumber(v * scale));
  const rows = [...shards.values()].sort((a, b) => a.node.localeCompare(b.node) || Number(a.shard) - Number(b.shard));
  root.replaceChildren(el("h2", {}, "World"),
    rows.length ? table("world-shards", ["Node", "Shard", "Towers", "Creeps", "Last checkpoint"], rows.map((r) => el("tr", {},
      el("td", {}, r.node), el("td", {}, r.shard), el("td", {}, number(r.world_towers)), el("td", {}, number(r.world_creeps)),
      el("td", {}, r.world_last_checkpoint_timestamp_seconds === undefined ? "none yet" : `${number(r.world_last_checkpoint_timestamp_seconds)} s ago`))))
      : el("p", { id: "world-shards", class: "muted" }, "No world runs on any node."),
    el("h3", {}, "Per node"),
    table("world-nodes", ["Node", "Tick p50 (ms)", "Tick p99 (ms)", "Subscribers", "Checkpoint p99 (s)"], nodes.map(({ node, figures }) => el("tr", {},
      el("td", {}, node), el("td", {}, number(figures["world_tick_seconds p50"], 1000)), el("td", {}, number(figures["world_tick_seconds p99"], 1000)),
      el("td", {}, number(figures["world_subscribers value"])), el("td", {}, number(figures["world_checkpoint_seconds p99"]))))));
}

// --- the autoscaler's decisions ----------------------------------------------------------------------

async function autoscalerPage() {
  const root = view();
  const answer = await api("GET", "/api/autoscaler");
  if (!answer.configured) {
    root.replaceChildren(el("h2", {}, "Autoscaler"), el("p", { id: "autoscaler-none", class: "muted" }, "No autoscaler is configured (console.autoscaler_url)."));
    return;
  }
  if (answer.error) {
    root.replaceChildren(el("h2", {}, "Autoscaler"), el("p", { class: "error", id: "autoscaler-error" }, answer.error));
    return;
  }
  root.replaceChildren(el("h2", {}, "Autoscaler"),
    el("p", { id: "autoscaler-now" }, `Replicas wanted now: ${answer.replicas} · demand ${answer.source_up ? "readable" : "not readable (holding)"}`),
    table("autoscaler-decisions", ["When", "Kind", "Demand", "Rule", "Replicas", "Why"], (answer.decisions || []).map((d) => el("tr", {},
      el("td", {}, new Date(d.at * 1000).toISOString()), el("td", {}, d.kind + (d.dry_run ? " (dry run)" : "")),
      el("td", {}, d.demand === null || d.demand === undefined ? "–" : formatNumber(d.demand)), el("td", {}, d.rule || "–"),
      el("td", {}, `${d.from_replicas} → ${d.to_replicas}`), el("td", {}, d.why)))));
}

// JSON text indented for reading; any other text as it is.
function pretty(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}
